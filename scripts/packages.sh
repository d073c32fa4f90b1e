# Shared by the benchmark scripts (sourced, not run): Debian packages
# installed when missing, and where nginx is.

# Debian packages, installed when missing (as root, or through sudo).
apt_install() {
    command -v apt-get >/dev/null 2>&1 || return 1
    local run=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || return 1
        run=(sudo -n)
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${run[@]}" apt-get install -y -qq "$@" >/dev/null 2>&1 && return 0
    "${run[@]}" apt-get update -qq >/dev/null 2>&1 || return 1
    "${run[@]}" apt-get install -y -qq "$@" >/dev/null 2>&1
}

# nginx's path, empty when it is not installed.
find_nginx() {
    command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || true
}
