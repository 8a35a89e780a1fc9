#if canImport(Glibc)
import Glibc
#endif
import ParleyJSON

/// GeoPoint operands and the geometry the geo operators need.
///
/// Distances are central angles in radians, as Parse's `$maxDistance`: kilometres and miles are
/// converted with Parse Server's radii (6371 km, 3959 mi). SQL multiplies the angle by
/// earthdistance's `earth()` so the comparison happens on the sphere the `geo` column was built
/// on; the set of matches is exactly "central angle ≤ θ", i.e. great-circle distance on a
/// 6371 km sphere ≤ the requested kilometres.
enum GeoMath {
    /// Parse Server's kilometres per radian (`$maxDistanceInKilometers`).
    static let kilometersPerRadian = 6371.0
    /// Parse Server's miles per radian (`$maxDistanceInMiles`).
    static let milesPerRadian = 3959.0
    /// Slack added around a `$box`'s bounding cube on the unit sphere (about 6 mm on Earth) so
    /// rounding never drops a point the exact latitude/longitude test accepts.
    static let cubeSlack = 1e-9

    /// The straight-line distance through a unit sphere between two points `radians` apart:
    /// `2 sin(θ / 2)`, increasing with θ up to π, so "chord ≤ unitChord(θ) × radius" is "central
    /// angle ≤ θ". From π on every point qualifies: 4 is beyond any chord (at most 2).
    static func unitChord(radians: Double) -> Double {
        radians >= .pi ? 4 : 2 * sin(radians / 2)
    }

    struct Point: Equatable {
        var latitude: Double
        var longitude: Double
    }

    /// A `{"__type":"GeoPoint","latitude":…,"longitude":…}` object (`__type` may be omitted).
    static func point(_ value: JSONValue, _ context: String) throws(QueryError) -> Point {
        guard case .object(let object) = value, object["__type"] == nil || object["__type"]?.string == "GeoPoint",
              let latitude = object["latitude"]?.double, let longitude = object["longitude"]?.double else {
            throw .invalidQuery("\(context) expects a GeoPoint")
        }
        return try validated(latitude: latitude, longitude: longitude, context)
    }

    /// A GeoPoint object or a `[longitude, latitude]` array (`$centerSphere`).
    static func pointOrPair(_ value: JSONValue, _ context: String) throws(QueryError) -> Point {
        if case .array(let pair) = value {
            guard pair.count == 2, let longitude = pair[0].double, let latitude = pair[1].double else {
                throw .invalidQuery("\(context) expects a GeoPoint or [longitude, latitude]")
            }
            return try validated(latitude: latitude, longitude: longitude, context)
        }
        return try point(value, context)
    }

    static func validated(latitude: Double, longitude: Double, _ context: String) throws(QueryError) -> Point {
        guard latitude.isFinite, latitude >= -90, latitude <= 90 else {
            throw .invalidQuery("\(context): latitude must be between -90 and 90")
        }
        guard longitude.isFinite, longitude >= -180, longitude <= 180 else {
            throw .invalidQuery("\(context): longitude must be between -180 and 180")
        }
        return Point(latitude: latitude, longitude: longitude)
    }

    /// A distance operand: a finite, non-negative number.
    static func distance(_ value: JSONValue, _ context: String) throws(QueryError) -> Double {
        guard let number = value.double, number.isFinite, number >= 0 else {
            throw .invalidQuery("\(context) must be a non-negative number")
        }
        return number
    }

    /// The axis-aligned box, on the unit sphere's Cartesian coordinates (earthdistance's axes:
    /// x toward 0°N 0°E, y toward 0°N 90°E, z toward the north pole), holding every point of the
    /// latitude/longitude rectangle. When `west > east` the rectangle crosses the antimeridian.
    static func boundingCube(south: Double, west: Double, north: Double, east: Double) -> (low: [Double], high: [Double]) {
        var latitudes = [south, north]
        if south < 0 && north > 0 { latitudes.append(0) }
        let eastUnwrapped = west <= east ? east : east + 360
        var longitudes = [west, eastUnwrapped]
        var quarter = (west / 90).rounded(.down) * 90 + 90
        while quarter < eastUnwrapped {
            longitudes.append(quarter)
            quarter += 90
        }
        var low = [Double.infinity, .infinity, .infinity]
        var high = [-Double.infinity, -.infinity, -.infinity]
        for latitude in latitudes {
            let phi = latitude * .pi / 180
            for longitude in longitudes {
                let lambda = longitude * .pi / 180
                let coordinates = [cos(phi) * cos(lambda), cos(phi) * sin(lambda), sin(phi)]
                for axis in 0..<3 {
                    low[axis] = min(low[axis], coordinates[axis])
                    high[axis] = max(high[axis], coordinates[axis])
                }
            }
        }
        return (low.map { $0 - cubeSlack }, high.map { $0 + cubeSlack })
    }
}
