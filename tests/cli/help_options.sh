#!/usr/bin/env bash
# Every option a --help page lists is one its command parses: for each page (ninferc, ninfer
# and its subcommands), each option that starts a help line, or follows a comma before the
# line's description, is given to that command with a plan that does not exist. The command
# may refuse the missing file or value, but not the option ("unknown option").
#   tests/cli/help_options.sh NINFERC NINFER
set -u
ninferc=$1 ninfer=$2
missing=/nonexistent/ninfer-help-check
failed=0

# page NAME MIN HELP-COMMAND... -- RUN-PREFIX...: RUN-PREFIX OPTION must parse OPTION.
page() {
  local name=$1 min=$2
  shift 2
  local help=() run=()
  while [ "$1" != "--" ]; do help+=("$1"); shift; done
  shift
  run=("$@")
  local options
  options=$("${help[@]}" 2>&1 | grep -E '^ +-' | sed -E 's/^ +//; s/ {2,}.*//' |
    tr ',' '\n' | sed -E 's/^ +//' | grep -E '^-' | cut -d' ' -f1 | sort -u)
  local count
  count=$(printf '%s\n' "$options" | grep -c .)
  if [ "$count" -lt "$min" ]; then
    echo "FAIL $name: --help lists $count options, expected at least $min"
    failed=1
    return
  fi
  for option in $options; do
    local err
    err=$("${run[@]}" "$option" 2>&1 </dev/null >/dev/null)
    if printf '%s' "$err" | grep -q "unknown option"; then
      echo "FAIL $name: its --help lists $option, which it refuses: $err"
      failed=1
    fi
  done
  echo "$name: $count options"
}

page ninferc 20 "$ninferc" --help -- "$ninferc" "$missing.json"
page ninfer 12 "$ninfer" --help -- "$ninfer" "$missing.nplan"
for sub in bench perplexity kld chat; do
  page "ninfer $sub" 5 "$ninfer" "$sub" --help -- "$ninfer" "$sub" "$missing.nplan"
done
page "ninfer inspect" 1 "$ninfer" inspect --help -- "$ninfer" inspect "$missing.nplan"
page "ninfer tokenize" 2 "$ninfer" tokenize --help -- "$ninfer" tokenize "$missing.nplan" text
exit $failed
