#if canImport(Glibc)
import Glibc
#endif

/// Waiting for an event instead of sleeping a fixed time: polls a condition until it holds or a
/// deadline passes (generous, since the wait ends as soon as the event happens).
public enum WaitUntil {
    /// Polls `condition` every `interval` until it holds or `timeout` passes; whether it held.
    public static func holds(timeout: Duration = .seconds(10), interval: Duration = .milliseconds(10),
                             _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            let (seconds, attoseconds) = interval.components
            usleep(useconds_t(seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
        }
        return try condition()
    }

    /// Polls `condition` every `interval` until it holds or `timeout` passes; whether it held.
    public static func holdsAsync(timeout: Duration = .seconds(10), interval: Duration = .milliseconds(10),
                             _ condition: () async throws -> Bool) async rethrows -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try? await Task.sleep(for: interval)
        }
        return try await condition()
    }
}
