# The refusal check the example programs' option tests share (options_test.sh,
# gpt_options_test.sh, quantize_options_test.sh), sourced by them. Before sourcing, set
#   program  the program under test        common   the arguments every run gets (an array)
#   started  a grep pattern of its output that means it began its work (an epoch, a step, ...)
# refuses EXPECTED ARGS...: the program, given the common arguments and ARGS, exits with status 2,
# says EXPECTED on stderr and never starts its work; each miss is printed and counted in
# `failures`, which the test exits with.
failures=0

refuses() {
  local expected=$1
  shift
  local status=0
  "$program" "${common[@]}" "$@" > out.txt 2> err.txt || status=$?
  if [ "$status" -ne 2 ] || ! grep -qF -- "$expected" err.txt || grep -q -- "$started" out.txt; then
    echo "FAIL: $(basename "$program") $* -> status $status, stderr:"; sed 's/^/  /' err.txt
    echo "  expected status 2 and: $expected"
    failures=$((failures + 1))
  fi
}
