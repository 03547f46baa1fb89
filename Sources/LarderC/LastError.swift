#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLarderSupport
import Larder

/// The detail of the last error on each thread, kept as a C string for
/// `larder_last_error_message`.
enum LastError {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { free($0) }
        precondition(rc == 0, "pthread_key_create failed: \(rc)")
        return key
    }()

    private static let empty: StaticString = ""

    static func set(_ message: String) {
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, strdup(message))
        free(previous)
        lrd_set_has_error_message(1)
    }

    /// Called by every function of the C API: a thread-local flag spares the usual call, which
    /// has no message to clear, the key's lookup.
    @inline(__always)
    static func clear() {
        guard lrd_has_error_message() != 0 else { return }
        if let previous = pthread_getspecific(key) {
            pthread_setspecific(key, nil)
            free(previous)
        }
        lrd_set_has_error_message(0)
    }

    static var message: UnsafePointer<CChar> {
        if let current = pthread_getspecific(key) {
            return UnsafePointer(current.assumingMemoryBound(to: CChar.self))
        }
        return CString.of(empty)
    }
}

enum CString {
    /// A static string's bytes as a C string (literals are NUL-terminated).
    static func of(_ string: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(string.utf8Start).assumingMemoryBound(to: CChar.self)
    }
}
