-- wrk script for bench/metadata_storm.py: simulated guests crawling the metadata service.
--
-- wrk <options> <url> -s bench/metadata_storm_wrk.lua \
--     -- TARGET INSTANCES PATHS ONE_CYCLE THREADS CONNECTIONS
--   TARGET     "cloudseed": request the crawl's paths as they are;
--              "nginx": request /<instance id>/<flat file name> (same headers)
--   INSTANCES  file, one line per instance: "<uuid> <project> <signature>"
--   PATHS      file, one line per request of one guest's crawl: "<path> <flat file name>"
--   ONE_CYCLE  "1": each thread stops after one response per (instance, path) of its share
--              and prints "CYCLE-DONE" (the cold-cache pass); "0": cycle until wrk stops
--   THREADS, CONNECTIONS  wrk's -t and -c again (a thread cannot ask wrk for them)
--
-- Each thread owns a contiguous share of the instances. It walks them a window at a time
-- (window = its connection count): step k of the crawl for every guest of the window, then
-- step k+1, and so on, so many guests are mid-boot at once while each guest's own requests
-- still come in cloud-init's order, spread over connections (and so over server workers).
-- The result is one line "STORM-RESULT key=value ..." printed by done() (bench/wrk_result.lua).

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local result = dofile(here .. "wrk_result.lua")

local thread_count = 0

-- Paced passes: each connection waits STORM_DELAY_MS after an answer before its next request.
-- wrk asks whether delay() exists when the script loads, before init() sees any argument,
-- hence the environment; without it (or 0) there is no delay() at all.
local delay_ms = tonumber(os.getenv("STORM_DELAY_MS") or "0") or 0
if delay_ms > 0 then
  function delay()
    return delay_ms
  end
end

function setup(thread)
  thread:set("thread_index", thread_count)
  thread_count = thread_count + 1
  result.add_thread(thread)
end

local function read_lines(path)
  local lines = {}
  for line in io.lines(path) do
    if line ~= "" then table.insert(lines, line) end
  end
  return lines
end

local function split(line)
  local fields = {}
  for field in line:gmatch("%S+") do table.insert(fields, field) end
  return fields
end

-- STORM_CONNECTION_CLOSE=1: every request asks for its connection to be closed after the
-- answer, and wrk opens a new one for the next (as cloud-init does: its readurl makes a
-- requests.Session per request and closes it).
local connection_close = os.getenv("STORM_CONNECTION_CLOSE") == "1"

-- Set by init(); read by request() and response().
local targets, steps, window, share = {}, 0, 0, 0
local step, guest, block_start = 1, 0, 0
local responses, one_cycle, cycle_announced = 0, false, false

function init(args)
  local target, instance_file, path_file = args[1], args[2], args[3]
  one_cycle = args[4] == "1"
  local thread_total, connections = tonumber(args[5]), tonumber(args[6])
  local instances = read_lines(instance_file)
  local per_thread = math.ceil(#instances / thread_total)
  local first = thread_index * per_thread + 1
  local last = math.min(#instances, first + per_thread - 1)
  local paths = {}
  for _, line in ipairs(read_lines(path_file)) do table.insert(paths, split(line)) end
  -- Request lines are prebuilt per (instance, path): request() then only indexes tables.
  local host = "Host: " .. wrk.host .. ":" .. wrk.port .. "\r\n"
  for i = first, last do
    local id, project, signature = unpack(split(instances[i]))
    local head = host .. "User-Agent: Cloud-Init/22.4.2\r\nAccept: */*\r\n"
      .. (connection_close and "Connection: close\r\n" or "")
      .. "X-Instance-ID: " .. id .. "\r\nX-Tenant-ID: " .. project
      .. "\r\nX-Instance-ID-Signature: " .. signature .. "\r\n\r\n"
    local row = {}
    for k, p in ipairs(paths) do
      local path = target == "nginx" and ("/" .. id .. "/" .. p[2]) or p[1]
      row[k] = "GET " .. path .. " HTTP/1.1\r\n" .. head
    end
    table.insert(targets, row)
  end
  steps = #paths
  window = math.max(1, math.floor(connections / thread_total))
  share = #targets * #paths
end

function request()
  -- The next (guest, step) of the current window; then the next window; then wrap around.
  local width = math.min(window, #targets - block_start)
  local text = targets[block_start + guest + 1][step]
  guest = guest + 1
  if guest == width then
    guest = 0
    step = step + 1
    if step > steps then
      step = 1
      block_start = block_start + width
      if block_start >= #targets then block_start = 0 end
    end
  end
  return text
end

function response(status, _headers, _body)
  result.count(status)
  responses = responses + 1
  if responses == share and not cycle_announced then
    cycle_announced = true
    if one_cycle then
      io.write("CYCLE-DONE\n")
      io.flush()
      wrk.thread:stop()
    end
  end
end

function done(summary, latency, _requests)
  result.report(summary, latency)
end
