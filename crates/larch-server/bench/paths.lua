-- wrk script: GET /context/head/raw/bytes/<path>[?depth=N] for paths drawn at random from a file.
-- Usage: PATHS=values.txt DEPTH= DELAY_MS= wrk -t1 -c16 -d20s --latency -s paths.lua http://127.0.0.1:PORT
local paths = {}
local file = assert(io.open(os.getenv("PATHS") or "paths.txt", "r"))
for line in file:lines() do
  if #line > 0 then paths[#paths + 1] = line end
end
file:close()
local depth = os.getenv("DEPTH") or ""
-- DELAY_MS: each connection waits this long between requests (bounds the rate: connections / delay).
local delay_ms = tonumber(os.getenv("DELAY_MS") or "")
local suffix = depth ~= "" and ("?depth=" .. depth) or ""

function setup(thread)
  thread:set("seed", math.random(1, 1000000))
end

function init(args)
  math.randomseed(seed or os.time())
end

if delay_ms then
  delay = function() return delay_ms end
end

request = function()
  local path = paths[math.random(1, #paths)]
  return wrk.format("GET", "/context/head/raw/bytes/" .. path .. suffix)
end

done = function(summary, latency, requests)
  io.write(string.format("requests %d, errors: connect %d read %d write %d status %d timeout %d\n",
    summary.requests, summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout))
  io.write(string.format("latency p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms\n",
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000, latency.max / 1000))
end
