/// The data protection class a new cache file gets on Apple platforms: when the system keeps its
/// contents encrypted, out of reach of the app's own reads.
///
/// Larder maps its file and reads it at any time, from any thread. A class that locks the file
/// while the device is locked (``complete``, and ``completeUnlessOpen`` for a file created while
/// locked) makes every read and write in that time fail: an app that reads its cache in the
/// background (a background fetch, a notification extension, audio) needs
/// ``completeUntilFirstUserAuthentication`` or ``none``.
///
/// The class is applied to a file the open creates; an existing file keeps its own. Elsewhere
/// (Linux) it is accepted and has no effect.
///
/// The corresponding C field is `larder_options.file_protection` (`LARDER_PROTECTION_...`).
public enum FileProtection: UInt32, Sendable, CaseIterable {
    /// The system's default for the app's files (on iOS, until first user authentication,
    /// unless the app's entitlements say otherwise). Nothing is set.
    case systemDefault = 0
    /// Encrypted and out of reach while the device is locked (`FileProtectionType.complete`).
    case complete = 1
    /// Out of reach while the device is locked, unless it was open when the device locked
    /// (`FileProtectionType.completeUnlessOpen`).
    case completeUnlessOpen = 2
    /// Out of reach from boot until the user first unlocks the device; readable in the
    /// background afterwards (`FileProtectionType.completeUntilFirstUserAuthentication`).
    case completeUntilFirstUserAuthentication = 3
    /// Always readable (`FileProtectionType.none`).
    case none = 4
}
