from devctl.cli.app import main

main()
