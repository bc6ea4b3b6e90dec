# Sourced by the scripts in this folder: install_missing PKG... installs the
# Debian packages that are not installed yet (apt-get, with sudo when not
# root); on a system without dpkg it assumes they are there.
install_missing() {
  local missing=() pkg me
  me=$(basename "$0")
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "$me: not a Debian system; assuming the dependencies are installed" >&2
    return 0
  fi
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$pkg")
    fi
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "$me: installing ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
}
