-- wrk script for bench/accounts/username.sh: GET <mount>/users?where={"username":"<n>"} for a
-- random seeded username n in 1..USERNAME_COUNT, as an anonymous client.
--
-- Each thread formats REQUEST_POOL random requests once (at start) and sends them in a cycle,
-- in the spirit of pgbench's cheap `\set p2 random(…)`: on two cores the load generator's CPU
-- is taken from the server under test, and formatting every request in Lua cost wrk about a
-- third of its CPU (docs/performance.md, "The load generator's share").
local count = tonumber(os.getenv("USERNAME_COUNT") or "100000")
local pool = tonumber(os.getenv("REQUEST_POOL") or "20000")
local app = os.getenv("PARLEY_APP_ID") or "parley"
local mount = os.getenv("PARLEY_MOUNT_PATH") or "/parse"
local headers = { ["X-Parse-Application-Id"] = app }
local requests = {}
local next_index = 0

function setup(thread)
    thread:set("seed", math.random(1, 1000000))
end

function init(args)
    math.randomseed(seed or 1)
    for i = 1, pool do
        -- {"username":"<n>"} percent-encoded
        requests[i] = wrk.format("GET", mount .. "/users?where=%7B%22username%22%3A%22" .. math.random(1, count) .. "%22%7D", headers)
    end
end

request = function()
    next_index = next_index % pool + 1
    return requests[next_index]
end
