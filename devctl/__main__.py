from devctl.cli.start import main

main()
