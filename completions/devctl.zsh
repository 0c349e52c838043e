#compdef devctl

_devctl_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _DEVCTL_COMPLETE=complete_zsh devctl)
}

compdef _devctl_completion devctl
