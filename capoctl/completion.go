package capoctl

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// commands are capoctl's subcommands, as completion offers them.
var commands = []string{"list", "returns", "release", "explain", "adopt-capo", "completion"}

// completion prints a completion script for shell: subcommands first, then
// the flags of fs, read from fs itself so a new flag is completed too. The
// plugin, kubectl-capo, is completed by kubectl through a
// kubectl_complete-capo script (kubectl 1.26 and later).
func completion(args []string, fs *flag.FlagSet, name string, out, errw io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(errw, name+" completion: give one shell: bash, zsh or fish")
		return 2
	}
	var flags []string
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) > 1 {
			flags = append(flags, "--"+f.Name)
		} else {
			flags = append(flags, "-"+f.Name)
		}
	})
	cmds, fl := strings.Join(commands, " "), strings.Join(flags, " ")
	switch args[0] {
	case "bash":
		fmt.Fprintf(out, bashScript, cmds, fl)
	case "zsh":
		// zsh completes through bash's completion functions.
		fmt.Fprintf(out, "autoload -U +X bashcompinit && bashcompinit\n"+bashScript, cmds, fl)
	case "fish":
		fmt.Fprintf(out, "complete -c capoctl -f -n '__fish_use_subcommand' -a '%s'\n", cmds)
		fs.VisitAll(func(f *flag.Flag) {
			opt := "-l " + f.Name
			if len(f.Name) == 1 {
				opt = "-s " + f.Name
			}
			fmt.Fprintf(out, "complete -c capoctl %s -d %s\n", opt, fishQuote(f.Usage))
		})
		fmt.Fprintf(out, "complete -c capoctl -f -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n")
	default:
		fmt.Fprintf(errw, "%s completion: unknown shell %q: bash, zsh or fish\n", name, args[0])
		return 2
	}
	return 0
}

func fishQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// bashScript completes the subcommand, the flags, and a shell after
// `completion`.
const bashScript = `_capoctl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "%s" -- "$cur"))
    elif [ "$prev" = completion ]; then
        COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur"))
    elif [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "%s" -- "$cur"))
    fi
}
complete -o default -F _capoctl capoctl kubectl-capo
`
