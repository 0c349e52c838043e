_devctl_completion() {
    local IFS=$'\n'
    mapfile -t COMPREPLY < <(env COMP_WORDS="${COMP_WORDS[*]}" \
                                 COMP_CWORD="$COMP_CWORD" \
                                 _DEVCTL_COMPLETE=complete_bash "$1")
    return 0
}

complete -o default -F _devctl_completion devctl
