#compdef devctl

_devctl_completion() {
  local -a values shown
  local line value described=0
  for line in "${(@f)$(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _DEVCTL_COMPLETE=complete_zsh devctl)}"; do
    [[ -z $line ]] && continue
    value=${line%%$'\t'*}
    values+=("$value")
    if [[ $line == *$'\t'* ]]; then
      shown+=("$value  -- ${line#*$'\t'}")
      described=1
    else
      shown+=("$value")
    fi
  done
  if (( ${#values} == 0 )); then
    _files
  elif (( described )); then
    compadd -l -d shown -a values
  else
    compadd -a values
  fi
}

compdef _devctl_completion devctl
