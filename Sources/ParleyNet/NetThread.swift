#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// A joinable POSIX thread running one closure.
struct NetThread: Sendable {
    private let handle: pthread_t

    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    static func spawn(name: String, _ body: @escaping @Sendable () -> Void) throws(NetError) -> NetThread {
        var handle = pthread_t()
        let shortName = String(name.prefix(15))
        let box = Unmanaged.passRetained(Body {
            _ = parley_set_thread_name(shortName)
            body()
        }).toOpaque()
        let result = pthread_create(&handle, nil, { raw in
            let body = Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue()
            body.run()
            return nil
        }, box)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(box).release()
            throw NetError.system(call: "pthread_create", errno: result)
        }
        return NetThread(handle: handle)
    }

    func join() {
        pthread_join(handle, nil)
    }
}
