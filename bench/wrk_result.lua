-- The result half of cloudseed's wrk scripts (bench/metadata_storm_wrk.lua,
-- bench/side_by_side_wrk.lua): count each thread's response statuses and print, when wrk is
-- done, the one line bench/storm_wrk.py's parse_wrk() reads:
-- "STORM-RESULT key=value ... statuses=200:N,...".
--
-- A script loads it relative to its own file (wrk runs scripts from the working directory,
-- and Lua's require searches only package.path):
--   local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
--   local result = dofile(here .. "wrk_result.lua")
-- and calls result.add_thread(thread) from setup(), result.count(status) from response(),
-- and result.report(summary, latency) from done(). wrk loads the script once per thread and
-- once more for setup() and done(), so each Lua state gets its own copy of this file.

local result = {}

local threads = {}

statuses = {}  -- global: report() reads each thread's through thread:get

function result.add_thread(thread)
  table.insert(threads, thread)
end

function result.count(status)
  statuses[status] = (statuses[status] or 0) + 1
end

function result.report(summary, latency)
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

return result
