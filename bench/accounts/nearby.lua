-- wrk script for bench/accounts/nearby.sh: GET <mount>/users?where={"location":{"$nearSphere":…,
-- "$maxDistanceInKilometers":NEARBY_KM}} at a random centre inside the seeded area, as an
-- anonymous client (X-Parse-Application-Id only).
local km = os.getenv("NEARBY_KM") or "1"
local app = os.getenv("PARLEY_APP_ID") or "parley"
local mount = os.getenv("PARLEY_MOUNT_PATH") or "/parse"
math.randomseed(42)

local function encode(text)
    return (text:gsub("[^%w%-_%.~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

request = function()
    local where = string.format(
        '{"location":{"$nearSphere":{"__type":"GeoPoint","latitude":%.6f,"longitude":%.6f},"$maxDistanceInKilometers":%s}}',
        48.45 + math.random() * 0.8, 1.8 + math.random() * 1.1, km)
    return wrk.format("GET", mount .. "/users?where=" .. encode(where), { ["X-Parse-Application-Id"] = app })
end
