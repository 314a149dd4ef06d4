#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packaging (issue 7): build the .deb and .rpm of this build tree with cpack
# (what `make package` does), check their metadata and file lists, install the
# .deb, mount a pool with `mount -t fuse.stripefs`, through an fstab file
# (`mount -T FILE`, `mount -a --fstab FILE`) and with the commands of the
# stripefs@.service unit, read and write, unmount, then remove the package
# (dpkg -r, then --purge) and check that nothing of it is left.
#
# It installs a package on this machine: a stripefs package already installed
# (left by an earlier run) is purged first, and the EXIT trap unmounts and
# purges whatever this run installed.
# Needs: STRIPEFS (the built binary, for its version) and STRIPEFS_BUILD_DIR
# (the build tree holding CPackConfig.cmake), both set by ctest.
NO_DEFAULT_POOL=1
source "$(dirname "$0")/lib.sh"
for t in cpack dpkg dpkg-deb dpkg-query dpkg-shlibdeps rpm rpmbuild man systemd-analyze findmnt sha256sum; do need "$t"; done
BUILD_DIR=${STRIPEFS_BUILD_DIR:?set STRIPEFS_BUILD_DIR to the build tree (ctest does)}
[[ -f "$BUILD_DIR/CPackConfig.cmake" ]] || fail "no CPackConfig.cmake in $BUILD_DIR"
INSTALLED=/usr/bin/stripefs
HELPER=/sbin/mount.fuse.stripefs
UNIT=/usr/lib/systemd/system/stripefs@.service
INSTANCE=pkgtest-$$
CONF=/etc/stripefs/$INSTANCE.conf

package_state() { dpkg-query -W -f='${Status}' stripefs 2>/dev/null || true; }
purge_package() {
    if [[ -n "$(package_state)" && "$(package_state)" != *not-installed* ]]; then
        dpkg --purge stripefs >/dev/null 2>&1 || echo "[$TEST_NAME] teardown: dpkg --purge stripefs failed" >&2
    fi
}
remove_conf() { rm -f "$CONF"; }
CLEANUP_HOOKS+=(remove_conf purge_package)

# wait_daemon_gone PID: after an unmount the daemon flushes, closes its
# metadata and exits; the next mount of the pool needs it gone.
wait_daemon_gone() { wait_pid_gone "$1" || fail "daemon $1 still running after the unmount"; }

# --- a leftover package from an earlier run goes first
if [[ -n "$(package_state)" && "$(package_state)" != *not-installed* ]]; then
    log "purging the stripefs package left installed ($(package_state))"
    dpkg --purge stripefs >/dev/null || fail "could not purge the stripefs package left by an earlier run"
fi
[[ ! -e $INSTALLED ]] || fail "$INSTALLED exists but belongs to no stripefs package; remove it (a manual install?)"
[[ ! -e $HELPER ]] || fail "$HELPER exists but belongs to no stripefs package; remove it"

# --- build the packages from this tree
VERSION=$("$STRIPEFS" --version | tr -d '[:space:]')
[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "stripefs --version printed '$VERSION'"
DEB_ARCH=$(dpkg --print-architecture)
RPM_ARCH=$(uname -m)
cpack --config "$BUILD_DIR/CPackConfig.cmake" -B "$TMP/cpack" -D CPACK_OUTPUT_FILE_PREFIX="$TMP/dist" \
    >"$TMP/cpack.log" 2>&1 || { cat "$TMP/cpack.log" >&2; fail "cpack failed"; }
DEB=$TMP/dist/stripefs_${VERSION}_${DEB_ARCH}.deb
RPM=$TMP/dist/stripefs-${VERSION}-1.${RPM_ARCH}.rpm
[[ -f $DEB ]] || fail "cpack wrote no $(basename "$DEB"): $(ls "$TMP/dist")"
[[ -f $RPM ]] || fail "cpack wrote no $(basename "$RPM"): $(ls "$TMP/dist")"
ok "cpack wrote $(basename "$DEB") and $(basename "$RPM")"

# Files both packages must hold.
EXPECTED_FILES=(
    /usr/bin/stripefs
    /sbin/mount.fuse.stripefs
    /usr/lib/systemd/system/stripefs@.service
    /etc/stripefs/example.conf.sample
    /usr/share/man/man1/stripefs.1.gz
    /usr/share/man/man8/mount.fuse.stripefs.8.gz
    /usr/share/bash-completion/completions/stripefs
    /usr/share/doc/stripefs/README.md
    /usr/share/doc/stripefs/operations.md
    /usr/share/doc/stripefs/semantics.md
    /usr/share/stripefs/grafana/stripefs.json
    "/usr/lib/python3/dist-packages/stripefs$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
)
# The only directories the packages may own; every other is the system's.
OWN_DIRS=(/etc/stripefs /usr/share/doc/stripefs /usr/share/stripefs /usr/share/stripefs/grafana)

# --- the .deb
assert_eq "$(dpkg-deb -f "$DEB" Package)" stripefs "deb Package"
assert_eq "$(dpkg-deb -f "$DEB" Version)" "$VERSION" "deb Version"
assert_eq "$(dpkg-deb -f "$DEB" Architecture)" "$DEB_ARCH" "deb Architecture"
depends=$(dpkg-deb -f "$DEB" Depends)
dep_names=$(tr ',' '\n' <<<"$depends" | sed 's/(.*)//; s/[[:space:]]//g')
grep -qx fuse3 <<<"$dep_names" || fail "the deb does not depend on fuse3: $depends"
grep -qx 'libfuse3-[0-9]*' <<<"$dep_names" || fail "the deb has no shlibdeps dependency on libfuse3: $depends"
grep -qx 'libc6' <<<"$dep_names" || fail "the deb has no shlibdeps dependency on libc6: $depends"
ok "deb Depends: $depends"
dpkg-deb -c "$DEB" | awk '{print $NF}' | sed 's|^\./|/|; s|/$||' >"$TMP/deb.files"
for f in "${EXPECTED_FILES[@]}"; do grep -qxF "$f" "$TMP/deb.files" || fail "the deb lacks $f"; done
# The license: a real maintainer, and Debian's machine-readable copyright file (Apache-2.0) in the deb.
assert_eq "$(dpkg-deb -f "$DEB" Maintainer)" "stripefs developers <maintainers@stripefs.dev>" "deb Maintainer"
dpkg-deb --fsys-tarfile "$DEB" | tar -xOf - ./usr/share/doc/stripefs/copyright >"$TMP/copyright" \
    || fail "the deb has no /usr/share/doc/stripefs/copyright"
head -n 1 "$TMP/copyright" | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' \
    || fail "the deb's copyright file is not in the machine-readable format"
grep -qx 'License: Apache-2.0' "$TMP/copyright" || fail "the deb's copyright file does not name Apache-2.0"
ok "deb: Maintainer, and a copyright file under Apache-2.0"
ok "the deb holds the binary, helper, unit, sample, man pages, completion, docs"
dpkg-deb --ctrl-tarfile "$DEB" | tar -xOf - ./conffiles >"$TMP/conffiles"
assert_eq "$(cat "$TMP/conffiles")" /etc/stripefs/example.conf.sample "deb conffiles"

# --- the .rpm
rpm -qpl "$RPM" >"$TMP/rpm.files" 2>"$TMP/rpm.err" || fail "rpm -qpl failed: $(cat "$TMP/rpm.err")"
for f in "${EXPECTED_FILES[@]}"; do grep -qxF "$f" "$TMP/rpm.files" || fail "the rpm lacks $f"; done
ok "rpm -qpl lists /usr/bin/stripefs and the other files"
assert_eq "$(rpm -qp --qf '%{LICENSE}' "$RPM" 2>/dev/null)" Apache-2.0 "rpm License"
assert_eq "$(rpm -qpL "$RPM" 2>/dev/null)" /usr/share/doc/stripefs/LICENSE "rpm license files"
# rpm --dump: path size mtime digest mode ...; a mode of 04xxxx is a directory.
rpm -qp --dump "$RPM" 2>/dev/null | awk '$5 ~ /^04/ {print $1}' >"$TMP/rpm.dirs"
while read -r d; do
    [[ " ${OWN_DIRS[*]} " == *" $d "* ]] || fail "the rpm owns the system directory $d"
done <"$TMP/rpm.dirs"
ok "the rpm owns only $(tr '\n' ' ' <"$TMP/rpm.dirs")"
rpm -qpR "$RPM" >"$TMP/rpm.requires" 2>/dev/null || fail "rpm -qpR failed"
grep -qE '^fuse3?( |$)' "$TMP/rpm.requires" || fail "the rpm does not require fuse: $(tr '\n' ' ' <"$TMP/rpm.requires")"
grep -qF 'libfuse3.so.3()' "$TMP/rpm.requires" || fail "the rpm has no automatic requirement on libfuse3.so.3"
ok "rpm -qpR: $(grep -E '^fuse' "$TMP/rpm.requires") and libfuse3.so.3()"
assert_eq "$(rpm -qp --qf '%{VERSION}' "$RPM" 2>/dev/null)" "$VERSION" "rpm Version"
assert_eq "$(rpm -qpc "$RPM" 2>/dev/null)" /etc/stripefs/example.conf.sample "rpm config files"

# --- install the .deb
existed_before=()  # the package's directories that were on the system already
for d in $(dpkg-deb -c "$DEB" | awk '$1 ~ /^d/ {print $NF}' | sed 's|^\./|/|; s|/$||'); do
    [[ -d $d ]] && existed_before+=("$d")
done
dpkg -i "$DEB" >"$TMP/dpkg.log" 2>&1 || { cat "$TMP/dpkg.log" >&2; fail "dpkg -i failed"; }
[[ "$(package_state)" == "install ok installed" ]] || fail "after dpkg -i the package state is '$(package_state)'"
dpkg -L stripefs >"$TMP/installed.list" || fail "dpkg -L stripefs failed after the install"
ok "dpkg -i $(basename "$DEB")"
[[ -x $INSTALLED ]] || fail "$INSTALLED is not installed"
assert_eq "$("$INSTALLED" --version | tr -d '[:space:]')" "$VERSION" "installed stripefs --version"
[[ -x $HELPER ]] || fail "$HELPER is not installed or not executable"
[[ -f $UNIT ]] || fail "$UNIT is not installed"
grep -q "^ExecStart=$INSTALLED mount -f " "$UNIT" || fail "the unit does not run $INSTALLED mount -f: $(grep ExecStart "$UNIT")"
grep -q "^stripefs=$INSTALLED\$" "$HELPER" || fail "the helper does not run $INSTALLED"
ok "binary, helper and unit installed, naming $INSTALLED"
assert_eq "$(man -w stripefs)" /usr/share/man/man1/stripefs.1.gz "man -w stripefs"
assert_eq "$(man -w 8 mount.fuse.stripefs)" /usr/share/man/man8/mount.fuse.stripefs.8.gz "man -w 8 mount.fuse.stripefs"
warnings=$(MANWIDTH=80 man --warnings stripefs 2>&1 >/dev/null)
[[ -z $warnings ]] || fail "man stripefs warns: $warnings"
MANWIDTH=80 man stripefs 2>/dev/null | grep -q "stripefs $VERSION" || fail "man stripefs does not show version $VERSION"
ok "man stripefs renders without warnings, version $VERSION"
completions=$(bash -c 'source /usr/share/bash-completion/completions/stripefs && complete -p stripefs >/dev/null &&
                       COMP_WORDS=(stripefs ""); COMP_CWORD=1; _stripefs; echo "${COMPREPLY[*]}"') \
    || fail "sourcing the installed bash completion failed"
for sub in mkfs mount placement df fsck; do
    [[ " $completions " == *" $sub "* ]] || fail "the installed completion does not offer '$sub': $completions"
done
ok "bash completion installed: $completions"
where=$(cd / && env -u PYTHONPATH /usr/bin/python3 -c 'import stripefs; print(stripefs.__file__)') \
    || fail "the installed Python module does not import"
[[ $where == /usr/lib/python3/dist-packages/stripefs.* ]] || fail "python3 imports stripefs from $where"
ok "python3 imports the installed module: $where"

# --- the mount helper: which options reach stripefs mount (-f: print, do not run)
helper_cmd=$("$HELPER" /srv/meta /srv/mnt -f -o defaults,rw,noatime,nosuid,nodev,_netdev,nofail,noauto,auto,user,users,x-systemd.requires=/dev/null,x-systemd.automount,comment=pool,relatime,nodiratime,allow_other,ro,degraded,workers=2 2>&1)
assert_eq "$helper_cmd" "mount.fuse.stripefs: $INSTALLED mount /srv/meta /srv/mnt -o noatime,nosuid,nodev,relatime,allow_other,ro,degraded,workers=2" \
    "helper command for a busy option list"
assert_eq "$("$HELPER" /srv/meta /srv/mnt -f -o defaults,_netdev 2>&1)" "mount.fuse.stripefs: $INSTALLED mount /srv/meta /srv/mnt" \
    "helper command when no option is left"

# --- a pool made and mounted with the installed binary
META=$TMP/pool/meta MNT=$TMP/mnt
mkdir -p "$TMP/pool" "$MNT"
"$INSTALLED" mkfs --meta "$META" --drive "$TMP/pool/d0.img:64M" --drive "$TMP/pool/d1.img:64M" --chunk-size 1M >/dev/null \
    || fail "$INSTALLED mkfs failed"
MOUNTED+=("$META|$MNT")  # for the EXIT trap

check_mounted() {  # check_mounted WHAT OPTION...: $MNT is a stripefs mount with these options, served by $INSTALLED
    local what=$1 fstype opts pid o; shift
    mountpoint -q "$MNT" || fail "$what: $MNT is not mounted"
    fstype=$(findmnt -n -o FSTYPE --mountpoint "$MNT")
    assert_eq "$fstype" fuse.stripefs "$what: file system type"
    opts=$(findmnt -n -o OPTIONS --mountpoint "$MNT")
    for o in "$@"; do [[ ",$opts," == *",$o,"* ]] || fail "$what: option $o missing from $opts"; done
    pid=$(daemon_pid)
    pid_alive "$pid" || fail "$what: daemon $pid is not running"
    assert_eq "$(readlink "/proc/$pid/exe")" "$INSTALLED" "$what: the daemon's binary"
}
unmount_with_umount() {  # umount MNT; the daemon exits
    local pid
    pid=$(daemon_pid)
    umount "$MNT" || fail "umount $MNT failed"
    ! mountpoint -q "$MNT" || fail "$MNT still mounted after umount"
    wait_daemon_gone "$pid"
    ok "umount $MNT; daemon $pid exited"
}

log "--- mount -t fuse.stripefs"
mount -t fuse.stripefs "$META" "$MNT" -o noatime,nosuid,nodev,_netdev,nofail,x-systemd.requires=/dev/null,comment=test,relatime \
    || fail "mount -t fuse.stripefs $META $MNT failed"
check_mounted "mount -t fuse.stripefs -o noatime,nosuid,nodev,..." noatime nosuid nodev
head -c $((3 * MiB + 12345)) /dev/urandom >"$MNT/data.bin"
mkdir "$MNT/dir" && echo "hello from the package" >"$MNT/dir/hello.txt"
(cd "$MNT" && sha256sum data.bin dir/hello.txt) >"$TMP/sums"
(cd "$MNT" && sha256sum -c --quiet "$TMP/sums") || fail "files read back wrong through mount -t"
chunks=$("$INSTALLED" placement "$MNT/data.bin" --json | json 'len(d["chunks"])')
assert_eq "$chunks" 4 "chunks of data.bin (placement through the installed binary)"
"$INSTALLED" stats "$MNT" --json >"$TMP/stats.json" || fail "stats through the installed binary failed"
assert_eq "$(json 'd["requests"]["write"]["count"] > 0' <"$TMP/stats.json")" true \
    "stripefs stats MOUNTPOINT --json (installed binary) is valid JSON and counts the writes"
unmount_with_umount

log "--- mount -t fuse.stripefs -o ro"
mount -t fuse.stripefs "$META" "$MNT" -o ro,workers=2 || fail "mount -t fuse.stripefs -o ro failed"
check_mounted "mount -o ro" ro
(cd "$MNT" && sha256sum -c --quiet "$TMP/sums") || fail "files read back wrong through the ro mount"
expect_errno EROFS 'open(sys.argv[1], "w")' "$MNT/new.txt"
unmount_with_umount

log "--- fstab: mount -T FILE MOUNTPOINT"
printf '# test fstab\n%s %s fuse.stripefs defaults,allow_other 0 0\n' "$META" "$MNT" >"$TMP/fstab"
mount -T "$TMP/fstab" "$MNT" || fail "mount -T $TMP/fstab $MNT failed"
check_mounted "fstab line defaults,allow_other" allow_other
(cd "$MNT" && sha256sum -c --quiet "$TMP/sums") || fail "files read back wrong through the fstab mount"
echo "written through the fstab mount" >"$MNT/fstab.txt"
unmount_with_umount

log "--- fstab: mount -a --fstab FILE, with systemd and boot options"
printf '%s %s fuse.stripefs _netdev,nofail,noatime,x-systemd.requires=/dev/null,x-systemd.device-timeout=10s 0 0\n' \
    "$META" "$MNT" >"$TMP/fstab"
mount -a --fstab "$TMP/fstab" || fail "mount -a --fstab $TMP/fstab failed"
check_mounted "mount -a --fstab (options _netdev,nofail,noatime,x-systemd.*)" noatime
assert_eq "$(cat "$MNT/fstab.txt")" "written through the fstab mount" "file written by the previous mount"
(cd "$MNT" && sha256sum -c --quiet "$TMP/sums") || fail "files read back wrong through mount -a"
# mount(8) skips an fstab line whose source and target are mounted already,
# which needs the mount's source to be the metadata directory as fstab names it.
assert_eq "$(findmnt -n -o SOURCE --mountpoint "$MNT")" "$META" "the mount's source"
first=$(daemon_pid)
mount -a --fstab "$TMP/fstab" || fail "a second mount -a --fstab $TMP/fstab, with the line mounted, failed"
assert_eq "$(daemon_pid)" "$first" "the daemon after a second mount -a (no second one)"
assert_eq "$(findmnt -n --mountpoint "$MNT" | wc -l)" 1 "mounts at $MNT after a second mount -a"
unmount_with_umount

log "--- stripefs@.service"
systemd-analyze verify "$UNIT" >"$TMP/verify.log" 2>&1 || fail "systemd-analyze verify $UNIT: $(cat "$TMP/verify.log")"
ok "systemd-analyze verify $UNIT"
grep -qx 'Restart=on-failure' "$UNIT" || fail "the unit does not restart on failure"
printf 'META=%s\nMOUNTPOINT=%s\nOPTIONS=noatime\n' "$META" "$MNT" >"$CONF"
if [[ -d /run/systemd/system ]]; then
    # systemd runs this machine: start and stop the real unit.
    systemctl daemon-reload
    systemctl start "stripefs@$INSTANCE.service" || fail "systemctl start stripefs@$INSTANCE failed"
    wait_until "stripefs@$INSTANCE mounts $MNT" mountpoint -q "$MNT"
    check_mounted "stripefs@$INSTANCE.service" noatime
    pid=$(systemctl show -p MainPID --value "stripefs@$INSTANCE.service")
    assert_eq "$pid" "$(daemon_pid)" "the unit's main process is the daemon"
    (cd "$MNT" && sha256sum -c --quiet "$TMP/sums") || fail "files read back wrong through the unit's mount"
    systemctl stop "stripefs@$INSTANCE.service" || fail "systemctl stop stripefs@$INSTANCE failed"
    ! mountpoint -q "$MNT" || fail "$MNT still mounted after systemctl stop"
    wait_daemon_gone "$pid"
    assert_eq "$(systemctl show -p Result --value "stripefs@$INSTANCE.service")" success "the unit's result"
else
    # No systemd manager here (a container): run the unit's own ExecStart and
    # ExecStop lines, expanded as systemd does (%i; ${VAR} from the
    # EnvironmentFile, which is also the commands' environment; $$ for $;
    # MAINPID for ExecStop), and check what systemd would see.
    unit_cmd() {  # unit_cmd KEY: the expanded command line of KEY, NUL-separated
        python3 - "$UNIT" "$INSTANCE" "$1" <<'EOF'
import re, shlex, sys
unit, instance, key = sys.argv[1:]
env, cmd = {}, None
for line in open(unit):
    line = line.strip()
    if line.startswith("EnvironmentFile="):
        path = line.split("=", 1)[1].lstrip("-").replace("%i", instance)
        for l in open(path):
            l = l.strip()
            if l and not l.startswith("#"):
                k, v = l.split("=", 1)
                env[k] = v.strip('"')
    elif line.startswith(key + "="):
        cmd = line.split("=", 1)[1]
if cmd is None:
    sys.exit(f"no {key}= in {unit}")
cmd = cmd.lstrip("-@:+!").replace("%i", instance)
args = [re.sub(r"\$\$|\$\{(\w+)\}", lambda m: env.get(m.group(1), "") if m.group(1) else "$", w)
        for w in shlex.split(cmd)]
sys.stdout.write("\0".join(args))
EOF
    }
    mapfile -d '' start < <(unit_cmd ExecStart)
    mapfile -d '' stop < <(unit_cmd ExecStop)
    [[ ${#start[@]} -gt 0 && ${#stop[@]} -gt 0 ]] || fail "could not read ExecStart/ExecStop of $UNIT"
    log "ExecStart: ${start[*]}"
    "${start[@]}" 2>"$TMP/unit.stderr" &
    main=$!
    wait_until "ExecStart mounts $MNT" mountpoint -q "$MNT"
    check_mounted "the unit's ExecStart" noatime
    assert_eq "$(daemon_pid)" "$main" "the daemon is ExecStart's process (foreground, Type=simple)"
    (cd "$MNT" && sha256sum -c --quiet "$TMP/sums") || fail "files read back wrong through the unit's mount"
    log "ExecStop: ${stop[*]}"
    (set -a; source "$CONF"; MAINPID=$main; exec "${stop[@]}") || fail "the unit's ExecStop failed"
    ! mountpoint -q "$MNT" || fail "$MNT still mounted after ExecStop"
    ! pid_alive "$main" || fail "the daemon $main is still running when ExecStop returns"
    rc=0; wait "$main" || rc=$?
    assert_eq "$rc" 0 "ExecStart's exit status after ExecStop (0: systemd records success)"
    # ExecStop leaves alone anything but this pool's mount (after a failed start, say).
    mount -t tmpfs -o size=1M stripefs-test "$MNT" || fail "could not mount a tmpfs on $MNT"
    (set -a; source "$CONF"; MAINPID=; exec "${stop[@]}") || fail "the unit's ExecStop failed with a tmpfs on $MNT"
    mountpoint -q "$MNT" || fail "ExecStop unmounted a tmpfs that is not the pool"
    umount "$MNT" || fail "could not unmount the tmpfs on $MNT"
    ok "ExecStop leaves a tmpfs on MOUNTPOINT mounted"
fi
rm -f "$CONF"

log "--- remove the package"
dpkg -r stripefs >"$TMP/dpkg.log" 2>&1 || { cat "$TMP/dpkg.log" >&2; fail "dpkg -r stripefs failed"; }
[[ ! -e $INSTALLED ]] || fail "$INSTALLED is left after dpkg -r"
[[ ! -e $HELPER ]] || fail "$HELPER is left after dpkg -r"
[[ ! -e $UNIT ]] || fail "$UNIT is left after dpkg -r"
[[ -f /etc/stripefs/example.conf.sample ]] || fail "dpkg -r removed the conffile (only --purge should)"
ok "dpkg -r: binary, helper and unit gone, the conffile kept"
dpkg --purge stripefs >"$TMP/dpkg.log" 2>&1 || { cat "$TMP/dpkg.log" >&2; fail "dpkg --purge stripefs failed"; }
! dpkg -L stripefs >/dev/null 2>&1 || fail "dpkg -L stripefs still lists files after --purge"
while read -r path; do
    [[ -z $path || $path == /. ]] && continue
    if [[ -d $path ]]; then  # a directory, or a symlink to one (/sbin on a merged /usr)
        [[ " ${existed_before[*]} " == *" $path "* ]] || fail "directory $path is left after --purge"
    elif [[ -e $path || -L $path ]]; then
        fail "$path is left after --purge"
    fi
done <"$TMP/installed.list"
! man -w stripefs >/dev/null 2>&1 || fail "man -w stripefs still finds a page after --purge"
ok "dpkg --purge: nothing of the package is left ($(wc -l <"$TMP/installed.list") paths checked)"
