#!/bin/sh
# The CIS baseline of the CISO target host. `sh harden.sh` applies it (idempotent);
# `sh harden.sh` prints `harden: changed` when a file it manages differs afterwards (content, mode, owner);
# `sh harden.sh audit` prints one `drift: ...` line per control that does not hold and exits 1
# when there is any (the environment's pristine check). Runs inside the container.
set -u
MODE=${1:-apply}
SSHD=/etc/ssh/sshd_config
SSHD_OPTS="PermitRootLogin=no MaxAuthTries=4 LoginGraceTime=60 PermitEmptyPasswords=no X11Forwarding=no"
MODULES="cramfs freevxfs hfs hfsplus usb-storage"
PERMS="/etc/passwd:644:root:root /etc/group:644:root:root /etc/shadow:640:root:shadow /etc/gshadow:640:root:shadow $SSHD:600:root:root /etc/crontab:600:root:root"
drift=0
say() { echo "drift: $*"; drift=1; }

sshd_value() { awk -v k="$1" 'tolower($1) == tolower(k) { print $2; exit }' "$SSHD"; }

# Content, mode and owner of every path the baseline manages (for `harden: changed`).
fingerprint() {
  for f in $SSHD /etc/passwd /etc/group /etc/shadow /etc/gshadow /etc/crontab /etc/login.defs \
           /etc/modprobe.d/cis.conf /etc/cron.allow /etc/cron.deny /etc/sudoers.d/cis-logging /tmp /var/tmp; do
    stat -c '%n %f %u %g' "$f" 2>/dev/null || echo "$f absent"
    [ -f "$f" ] && md5sum "$f"
  done
}

if [ "$MODE" = apply ]; then
  before=$(fingerprint)
  for kv in $SSHD_OPTS; do
    k=${kv%%=*}; v=${kv#*=}
    sed -i "/^[[:space:]]*$k[[:space:]]/Id" "$SSHD"
    echo "$k $v" >> "$SSHD"
  done
  for p in $PERMS; do
    f=${p%%:*}; rest=${p#*:}; m=${rest%%:*}; rest=${rest#*:}
    chown "${rest%%:*}:${rest#*:}" "$f"; chmod "$m" "$f"
  done
  sed -i -e 's/^PASS_MAX_DAYS.*/PASS_MAX_DAYS\t365/' -e 's/^PASS_MIN_DAYS.*/PASS_MIN_DAYS\t1/' /etc/login.defs
  : > /etc/modprobe.d/cis.conf
  for m in $MODULES; do printf 'install %s /bin/false\nblacklist %s\n' "$m" "$m" >> /etc/modprobe.d/cis.conf; done
  chmod 644 /etc/modprobe.d/cis.conf
  echo root > /etc/cron.allow; chown root:root /etc/cron.allow; chmod 640 /etc/cron.allow
  rm -f /etc/cron.deny
  echo 'Defaults logfile="/var/log/sudo.log"' > /etc/sudoers.d/cis-logging; chmod 440 /etc/sudoers.d/cis-logging
  chmod +t /tmp /var/tmp
  [ "$before" = "$(fingerprint)" ] || echo "harden: changed"
  exit 0
fi

for kv in $SSHD_OPTS; do
  k=${kv%%=*}; v=${kv#*=}
  [ "$(sshd_value "$k")" = "$v" ] || say "sshd $k is '$(sshd_value "$k")', baseline '$v'"
done
for p in $PERMS; do
  f=${p%%:*}; rest=${p#*:}; m=${rest%%:*}
  got=$(stat -c '%a:%U:%G' "$f" 2>/dev/null)
  [ "$got" = "$m:${rest#*:}" ] || say "$f is $got, baseline $m:${rest#*:}"
done
grep -q '^PASS_MAX_DAYS[[:space:]]*365$' /etc/login.defs || say "login.defs PASS_MAX_DAYS changed"
grep -q '^PASS_MIN_DAYS[[:space:]]*1$' /etc/login.defs || say "login.defs PASS_MIN_DAYS changed"
for m in $MODULES; do
  grep -q "^install $m /bin/false$" /etc/modprobe.d/cis.conf 2>/dev/null || say "module $m not denied"
done
[ -f /etc/cron.allow ] || say "/etc/cron.allow missing"
[ -e /etc/cron.deny ] && say "/etc/cron.deny exists"
grep -qs '^Defaults logfile=' /etc/sudoers.d/cis-logging || say "sudo logging not configured"
ww=$(find / -xdev -type d -perm -0002 ! -perm -1000 2>/dev/null | head -5)
[ -z "$ww" ] || say "world-writable directories without sticky bit: $ww"
uo=$(find / -xdev \( -nouser -o -nogroup \) 2>/dev/null | head -5)
[ -z "$uo" ] || say "unowned files: $uo"
exit $drift
