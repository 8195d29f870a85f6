# bash completion for aibox.  `aibox completion bash` prints it; make install
# puts it in PREFIX/share/bash-completion/completions/aibox.  It knows no
# command itself: it asks aibox for the candidates of the word under the
# cursor (`aibox completion --words`, docs/package.md), one a line, or
# ":files" for a file name.
_aibox() {
	local aibox=${COMP_WORDS[0]} line files=
	local -a cands=()
	[[ $aibox == */* && -x $aibox ]] || aibox=aibox
	while IFS= read -r line; do
		if [[ $line == :files ]]; then
			files=1
		elif [[ -n $line ]]; then
			cands+=("$line")
		fi
	done < <("$aibox" completion --words "$COMP_CWORD" "${COMP_WORDS[@]}" 2>/dev/null)
	if [[ -n $files ]]; then
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "${COMP_WORDS[COMP_CWORD]}")
	else
		COMPREPLY=("${cands[@]}")
	fi
}
complete -F _aibox aibox
