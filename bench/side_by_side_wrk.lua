-- wrk script for bench/side_by_side.py's compute API rounds: the request is wrk's own (URL and
-- -H headers: the Keystone token, the microversion); this only counts statuses and prints the
-- one result line bench/storm_wrk.py's parse_wrk() reads (bench/wrk_result.lua).

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local result = dofile(here .. "wrk_result.lua")

function setup(thread)
  result.add_thread(thread)
end

function response(status, _headers, _body)
  result.count(status)
end

function done(summary, latency, _requests)
  result.report(summary, latency)
end
