package toolrunner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// attack is a command that deletes the folder victim (or opens it to
// everyone) by a road that hides rm from a check matching words.
type attack struct {
	name, command string
	opens         bool // chmod: victim becomes writable by everyone instead of gone
}

var toolPathAttacks = []attack{
	// Issue 26's list.
	{"command substitution as the program", "$(printf rm) -rf victim", false},
	{"variable as the program", "x=rm; $x -rf victim", false},
	{"base64 piped into sh", "echo cm0gLXJmIHZpY3RpbQ== | base64 -d | sh", false},
	{"sh -c of a substitution", `sh -c "$(echo rm -rf victim)"`, false},
	{"python3 -c", `python3 -c 'import shutil; shutil.rmtree("victim")'`, false},
	{"perl -e", `perl -e 'use File::Path; rmtree("victim")'`, false},
	{"function wrapping rm", `f() { rm -rf "$1"; }; f victim`, false},
	{"alias wrapping rm", "shopt -s expand_aliases\nalias del='rm -rf'\ndel victim", false},
	{"symbolic chmod", "chmod -R a=rwx victim", true},
	// Invented for this issue.
	{"backslash", `\rm -rf victim`, false},
	{"empty quotes inside the name", `r''m -rf victim`, false},
	{"command builtin", "command rm -rf victim", false},
	{"env", "env rm -rf victim", false},
	{"env -S", "env -S 'rm -rf victim'", false},
	{"xargs", "echo victim | xargs rm -rf", false},
	{"find -exec", "find . -maxdepth 1 -name victim -exec rm -r {} +", false},
	{"brace expansion", "{rm,-rf,victim}", false},
	{"glob as the program", "/???/rm -rf victim", false},
	{"here-document into sh", "sh <<EOF\nrm -rf victim\nEOF", false},
	{"here-string into bash", "bash <<< 'rm -rf victim'", false},
	{"absolute path", "/bin/rm -rf victim", false},
	{"ANSI-C quoting", `$'\x72\x6d' -rf victim`, false},
	{"IFS", "IFS=_; c=rm_-rf_victim; $c", false},
	{"backticks", "`echo rm` -rf victim", false},
	{"exec", "exec rm -rf victim", false},
	{"eval", "eval 'rm -rf victim'", false},
	{"positional parameters", `set -- rm -rf victim; "$@"`, false},
	{"source a file", "source ./cleanup.sh", false},
	{"BASH_ENV", "BASH_ENV=./cleanup.sh bash -c true", false},
	{"timeout with a signal option", "timeout -s KILL 5 rm -rf victim", false},
	{"dash -c with a variable", "dash -c 'x=rm; $x -rf victim'", false},
	{"echo piped into bash", "echo 'rm -rf victim' | bash", false},
	{"here-document into python3", "python3 - <<'EOF'\nimport shutil\nshutil.rmtree('victim')\nEOF", false},
	{"node -e", `node -e 'require("fs").rmSync("victim",{recursive:true})'`, false},
	{"awk system()", `awk 'BEGIN{system("rm -rf victim")}'`, false},
	{"tar checkpoint action", "tar -cf /dev/null cleanup.sh --checkpoint=1 --checkpoint-action=exec='rm -rf victim'", false},
	{"git shell alias", "git -c alias.x='!rm -rf victim' x", false},
	{"hash -p", "hash -p /bin/rm ls; ls -rf victim", false},
	{"abbreviated long options", "rm --recur --forc victim", false},
	{"trap", "trap 'rm -rf victim' EXIT", false},
	{"arithmetic on a string", "x='a[$(rm -rf victim)]'; echo $((x))", false},
	{"arithmetic on a file's content", "read x < payload; echo $((x))", false},
	{"printf -v subscript", `printf -v 'a[$(rm -rf victim)]' x`, false},
	{"rm linked under another name", "ln -s /bin/rm del; ./del -rf victim", false},
	{"flock", "flock lock.file rm -rf victim", false},
	{"substitution as the target", "rm -rf $(echo victim)", false},
	{"a file named -rf", "touch ./-rf; rm *", false},
	{"coproc", "coproc rm -rf victim; wait", false},
	{"chmod o+w", "chmod o+w victim", true},
	{"a line that does not parse", "rm -rf victim\necho (", false},
}

// plantVictim lays out the workspace every attack expects: the victim folder with
// a file in it, a script and a payload that delete it.
func plantVictim(t *testing.T, root string) string {
	t.Helper()
	victim := filepath.Join(root, "victim")
	require.NoError(t, os.MkdirAll(victim, 0o755))
	require.NoError(t, os.Chmod(victim, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(victim, "keep.txt"), []byte("keep"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "cleanup.sh"), []byte("rm -rf victim\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "payload"), []byte("a[$(rm -rf victim)]\n"), 0o644))
	for _, leftover := range []string{"del", "-rf", "lock.file"} {
		_ = os.Remove(filepath.Join(root, leftover))
	}
	return victim
}

func harmed(t *testing.T, victim string, a attack) bool {
	t.Helper()
	info, err := os.Stat(victim)
	if a.opens {
		require.NoError(t, err)
		return info.Mode().Perm()&0o002 != 0
	}
	return err != nil
}

// Every attack, through the real terminal tool in the real sandbox: with
// approvals "deny" it does not run and the model reads why; with approvals
// "off" it runs and does the harm, so the refusal is what saved victim.
func TestApprovalEvasionsAreRefusedUnderDeny(t *testing.T) {
	h := newHarness(t)
	root := h.cfg.WorkspaceRoot
	for _, a := range toolPathAttacks {
		t.Run(a.name, func(t *testing.T) {
			victim := plantVictim(t, root)
			req := h.request("terminal", map[string]any{"command": a.command})
			req.ApprovalsMode = ApprovalsDeny
			res := h.run(req)
			require.Equal(t, "denied", res.GetStatus(), res.GetContent())
			require.Contains(t, res.GetContent(), "It was not run")
			require.Contains(t, res.GetContent(), "approvals are set to deny")
			require.False(t, harmed(t, victim, a), "the command ran")
			require.FileExists(t, filepath.Join(victim, "keep.txt"))

			victim = plantVictim(t, root)
			req = h.request("terminal", map[string]any{"command": a.command})
			req.ApprovalsMode = ApprovalsOff
			res = h.run(req)
			require.True(t, harmed(t, victim, a), "with approvals off the attack should work: %s", res.GetContent())
		})
	}
}
