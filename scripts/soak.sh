#!/usr/bin/env bash
# The soak's long form: mixed keep-alive and pipelined clients, GET, PUT,
# DELETE, small and streamed bodies, against the file server on the mio
# adapter, for SECONDS (default 300) on a release build. Every answer is
# checked; the server's resident memory and descriptors must end where
# they began. `cargo test` runs the same test for a few seconds.
#
#   scripts/soak.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
JSONTP_SOAK_SECS=$secs cargo test --release -p jsontp-cli --test cli \
    soak::a_soak_of_mixed_clients_leaves_the_server_as_it_found_it -- --exact --nocapture 2>&1 |
    grep -E '^soak:|test result|panicked|wrong answers|resident|descriptors'
