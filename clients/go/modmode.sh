# shellcheck shell=bash
# Sourced by test.sh after goenv.sh: the same packages in module mode, as a user's `go build`
# sees them. There is no module proxy where CI runs (GOPROXY=off), so a temporary go.work holds
# both modules of this directory (the root, standard library only, and ./gin) and points every
# module gin needs at the Debian package's copy under /usr/share/gocode (the same gin 1.8.1 the
# GOPATH build uses), the modules their go.mod files name included (Go 1.19 loads the go.mod of
# every module in the graph). A module Debian ships without a go.mod gets a copy with one. Leaves GOWORK exported and the caller in the root module.

modmode_src=/usr/share/gocode/src
modmode_dir="$(mktemp -d)"
trap 'rm -rf "$modmode_dir" "${goenv_gopath:-}"' EXIT
# A module Debian ships without its go.mod: a copy with one.
modmode_with_gomod() {
  local module="$1" copy
  copy="$modmode_dir/copies/$module"
  mkdir -p "$copy"
  cp -r "$modmode_src/$module/." "$copy/"
  printf 'module %s\n\ngo 1.11\n' "$module" >"$copy/go.mod"
  printf 'replace %s => %s\n' "$module" "$copy"
}

{
  printf 'go 1.19\n\nuse (\n\t%s\n\t%s\n)\n\n' "$goenv_here" "$goenv_here/gin"
  for module in \
    github.com/gin-gonic/gin \
    github.com/gin-contrib/sse \
    github.com/go-playground/locales \
    github.com/go-playground/universal-translator \
    github.com/go-playground/validator/v10 \
    github.com/leodido/go-urn \
    github.com/mattn/go-isatty \
    github.com/pelletier/go-toml/v2 \
    golang.org/x/crypto \
    golang.org/x/net \
    golang.org/x/sys \
    golang.org/x/text \
    google.golang.org/protobuf \
    gopkg.in/yaml.v2 \
    gopkg.in/yaml.v3 \
    github.com/stretchr/testify \
    github.com/stretchr/objx; do
    printf 'replace %s => %s\n' "$module" "$modmode_src/$module"
  done
  for module in github.com/ugorji/go/codec github.com/davecgh/go-spew github.com/pmezard/go-difflib; do
    modmode_with_gomod "$module"
  done
  # Go 1.19 still loads the go.mod of the version ./gin requires of its sibling: the same directory.
  printf 'replace github.com/sluice-rs/sluice/clients/go v0.1.0 => %s\n' "$goenv_here"
} >"$modmode_dir/go.work"

export GOWORK="$modmode_dir/go.work" GO111MODULE=on GOFLAGS="" GOPROXY=off GOPATH="$modmode_dir/gopath"
cd "$goenv_here"

# The graph also names modules that only the tests of gin's dependencies import (testify's
# helpers, go-playground/assert, ...), which Debian does not ship: an empty module (a go.mod and
# no package) stands for each, since nothing here builds a package of theirs. A package of one
# that something did import would still fail to build: only the graph is completed.
for _ in $(seq 1 40); do
  modmode_missing="$({ go list -m all 2>&1 || true; } | sed -n 's/.*[[:space:]]\([^[:space:]@]*\)@[^:]*: module lookup disabled by GOPROXY=off.*/\1/p' | head -1)"
  [ -n "$modmode_missing" ] || break
  mkdir -p "$modmode_dir/empty/$modmode_missing"
  printf 'module %s\n' "$modmode_missing" >"$modmode_dir/empty/$modmode_missing/go.mod"
  printf 'replace %s => %s\n' "$modmode_missing" "$modmode_dir/empty/$modmode_missing" >>"$GOWORK"
done
