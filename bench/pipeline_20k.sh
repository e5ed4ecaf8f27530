#!/usr/bin/env bash
# 20,000-device full and nightly loads: simulator in its own process, pipeline under /usr/bin/time -v.
# Usage: bench/pipeline_20k.sh  (needs /usr/bin/time; OUT=dir to keep the files elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf ${OUT:-/tmp/pipeline_20k} && mkdir -p ${OUT:-/tmp/pipeline_20k}
KEY=bench-key-0123456789abcdef; EID=5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f
.venv/bin/esper-warehouse simulate --devices 20000 --seed 7 --port 8799 --api-key $KEY --enterprise-id $EID > ${OUT:-/tmp/pipeline_20k}/sim.log 2>&1 &
SIM=$!
trap 'kill $SIM 2>/dev/null' EXIT
for i in $(seq 1 120); do curl -sf http://127.0.0.1:8799/_sim/now >/dev/null && break; sleep 1; done
export SOURCES__ESPER__API_KEY=$KEY SOURCES__ESPER__BASE_URL=http://127.0.0.1:8799/api SOURCES__ESPER__ENTERPRISE_ID=$EID
for phase in full nightly; do
  [ $phase = nightly ] && curl -sf -X POST 'http://127.0.0.1:8799/_sim/advance?hours=24' >/dev/null
  curl -sf -X POST http://127.0.0.1:8799/_sim/stats/reset >/dev/null
  /usr/bin/time -v .venv/bin/esper-warehouse run --warehouse ${OUT:-/tmp/pipeline_20k}/w.duckdb --no-models > ${OUT:-/tmp/pipeline_20k}/$phase.out 2> ${OUT:-/tmp/pipeline_20k}/$phase.err
  echo "== $phase"; grep -E "Elapsed|Maximum resident" ${OUT:-/tmp/pipeline_20k}/$phase.err
  curl -sf http://127.0.0.1:8799/_sim/stats | python3 -c "import json,sys; print('requests', json.load(sys.stdin)['total'])"
  grep -iE "rows|requests" ${OUT:-/tmp/pipeline_20k}/$phase.out | head -3
done
