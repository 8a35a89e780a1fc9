-- wrk script for bench/accounts/username.sh: GET <mount>/users?where={"username":"<n>"} for a
-- random seeded username n in 1..USERNAME_COUNT, as an anonymous client.
local count = tonumber(os.getenv("USERNAME_COUNT") or "100000")
local app = os.getenv("PARLEY_APP_ID") or "parley"
local mount = os.getenv("PARLEY_MOUNT_PATH") or "/parse"
local headers = { ["X-Parse-Application-Id"] = app }

function setup(thread)
    thread:set("seed", math.random(1, 1000000))
end

function init(args)
    math.randomseed(seed or 1)
end

request = function()
    -- {"username":"<n>"} percent-encoded
    return wrk.format("GET", mount .. "/users?where=%7B%22username%22%3A%22" .. math.random(1, count) .. "%22%7D", headers)
end
