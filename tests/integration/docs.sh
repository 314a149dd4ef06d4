#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The man page and the bash completion follow the CLI: every subcommand that
# `stripefs --help` lists has a section in stripefs(1) and is completed, and
# every option of `stripefs SUBCOMMAND --help` is described in that section and
# completed after the subcommand; neither names a subcommand the CLI lacks.
# Both man pages render without groff warnings.
NO_DEFAULT_POOL=1
source "$(dirname "$0")/lib.sh"
need man; need col
SRC=$(cd "$(dirname "$0")/../.." && pwd)
MAN1=$SRC/packaging/man/stripefs.1
MAN8=$SRC/packaging/man/mount.fuse.stripefs.8
COMPLETION=$SRC/packaging/completion/stripefs

for page in "$MAN1" "$MAN8"; do
    warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    [[ -z $warnings ]] || fail "$(basename "$page") renders with warnings: $warnings"
    ok "$(basename "$page") renders without warnings"
done
MANWIDTH=200 man -l "$MAN1" 2>/dev/null | col -b >"$TMP/stripefs.1.txt"

# The subcommands, from the "Subcommands:" block of `stripefs --help`.
mapfile -t subcommands < <("$STRIPEFS" --help | awk '/^Subcommands:/ {on = 1; next} on && NF {print $1}')
((${#subcommands[@]} >= 5)) || fail "found only ${#subcommands[@]} subcommands in stripefs --help: ${subcommands[*]}"
log "subcommands: ${subcommands[*]}"

# man_section SUB: the rendered text of the "stripefs SUB" subsection of stripefs(1).
man_section() {
    awk -v head="   stripefs $1" '
        $0 == head {on = 1; next}
        on && (/^   stripefs / || /^[A-Z]/) {exit}
        on {print}' "$TMP/stripefs.1.txt"
}
# options SUB: the options of `stripefs SUB --help`, the long form where there is one.
options() {
    "$STRIPEFS" "$1" --help | awk '/^Options:/ {on = 1; next} on && /^  -/ {print $1}' |
        sed 's/^-[^,-]*,//' | grep -vx -- '--help'
}
# completions WORD...: what the completion offers for `stripefs WORD... <cur>`, the last WORD being cur.
completions() {
    bash -c 'source "$1"; shift; COMP_WORDS=(stripefs "$@"); COMP_CWORD=$#; _stripefs; printf "%s\n" "${COMPREPLY[@]}"' \
        _ "$COMPLETION" "$@"
}

mapfile -t top_completions < <(completions "")
for sub in "${subcommands[@]}"; do
    section=$(man_section "$sub")
    [[ -n $section ]] || fail "stripefs(1) has no section 'stripefs $sub'"
    grep -qE "^ +stripefs $sub( |$)" <(sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' "$TMP/stripefs.1.txt") \
        || fail "the SYNOPSIS of stripefs(1) does not show 'stripefs $sub'"
    [[ " ${top_completions[*]} " == *" $sub "* ]] || fail "the completion does not offer the subcommand '$sub'"
    mapfile -t sub_completions < <(completions "$sub" -)
    for opt in $(options "$sub"); do
        grep -qE -- "(^|[^[:alnum:]-])$opt([^[:alnum:]-]|$)" <<<"$section" \
            || fail "stripefs(1) section 'stripefs $sub' does not describe $opt"
        [[ " ${sub_completions[*]} " == *" $opt "* ]] || fail "the completion of 'stripefs $sub -' lacks $opt"
    done
    ok "stripefs $sub: in the SYNOPSIS, a man section and the completion, with its options ($(options "$sub" | tr '\n' ' '))"
done

# Every mount option stripefs(1) describes is offered after `stripefs mount -o`.
mapfile -t mount_opts < <(awk '/^\.SH MOUNT OPTIONS/ {on = 1; next} /^\.SH/ {on = 0}
                               on && prev == ".TP" {print $2} {prev = $0}' "$SRC/packaging/man/stripefs.1")
(( ${#mount_opts[@]} >= 10 )) || fail "stripefs(1) lists only ${#mount_opts[@]} mount options: ${mount_opts[*]}"
mapfile -t o_completions < <(completions mount DIR MNT -o "")
for opt in "${mount_opts[@]}"; do
    [[ " ${o_completions[*]} " == *" $opt "* ]] || fail "the completion of 'stripefs mount -o' lacks $opt"
done
mapfile -t o_values < <(completions mount DIR MNT -o "ro,on_full=")
[[ "${o_values[*]}" == "ro,on_full=evict ro,on_full=enospc" ]] || fail "the completion of 'stripefs mount -o ro,on_full=' offers: ${o_values[*]}"
ok "the completion of 'stripefs mount -o' offers every mount option of stripefs(1) (${mount_opts[*]}) and their values"

# Nothing documented or completed that the CLI does not have.
mapfile -t man_sections < <(sed -nE 's/^   stripefs ([a-z-]+)$/\1/p' "$TMP/stripefs.1.txt")
for sub in "${man_sections[@]}"; do
    [[ " ${subcommands[*]} " == *" $sub "* ]] || fail "stripefs(1) documents 'stripefs $sub', which stripefs --help does not list"
done
for word in "${top_completions[@]}"; do
    [[ $word == --help || $word == --version || " ${subcommands[*]} " == *" $word "* ]] \
        || fail "the completion offers '$word', which stripefs --help does not list"
done
ok "stripefs(1) and the completion name no subcommand the CLI lacks"

# Every source file says its license (Apache-2.0, LICENSE) in an SPDX line near its top.
missing=$(find "$SRC"/{api,base,bench,engine,fs,meta,tests,tools} \( -name '*.cc' -o -name '*.h' -o -name '*.sh' -o -name '*.py' \) \
    -exec sh -c 'head -n 3 "$1" | grep -q "SPDX-License-Identifier: Apache-2.0" || echo "$1"' _ {} \;)
[[ -z $missing ]] || fail "source files without an SPDX-License-Identifier line: $missing"
ok "every source file carries SPDX-License-Identifier: Apache-2.0"
