-- wrk script for bench/side_by_side.py's compute API rounds: the request is wrk's own (URL and
-- -H headers: the Keystone token, the microversion); this only counts statuses and prints the
-- one result line bench/metadata_storm.py's parse_wrk() reads ("STORM-RESULT key=value ...").

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

statuses = {}  -- global: done() reads it through thread:get

function response(status, _headers, _body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, _requests)
  local counts = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses")) do
      counts[status] = (counts[status] or 0) + n
    end
  end
  local parts = {}
  for status, n in pairs(counts) do table.insert(parts, status .. ":" .. n) end
  local e = summary.errors
  io.write(string.format(
    "STORM-RESULT requests=%d duration_us=%d bytes=%d connect=%d read=%d write=%d "
      .. "status=%d timeout=%d p50_us=%d p75_us=%d p90_us=%d p99_us=%d p999_us=%d "
      .. "max_us=%d mean_us=%.1f statuses=%s\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write,
    e.status, e.timeout, latency:percentile(50), latency:percentile(75),
    latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency.max,
    latency.mean, table.concat(parts, ",")))
end
