#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLarderSupport

/// An open cache file and one shared mapping of it: the only owner of the descriptor and of
/// the raw mapped address.
///
/// Other types reach the map only through what this one hands out: checked byte ranges
/// (`bytes`, `mutableBytes`), typed words (`load`, `store`, the atomics), the shared-state page
/// (`sharedPage`), index slots (`slots`), and the start of the map for `ReadView`
/// (`viewBase`), whose readers check each offset against their limit.
///
/// The mapping covers `mappedLength` bytes (the cache's capacity) from the start, even while the
/// file itself is shorter: the file then grows in place and the mapping never moves, so no pointer
/// handed out inside one process is ever invalidated by growth. Bytes at or past `size` are never
/// touched (that would be SIGBUS); every accessor checks its range against `size`.
///
/// Invariant, checked in debug builds by `checkInvariants()`: `0 <= size <= mappedLength`.
final class MappedFile {
    let descriptor: FileDescriptor
    var path: String { descriptor.path }
    let isReadOnly: Bool
    /// Start of the mapping. Valid for `mappedLength` bytes of address space, `size` bytes of file.
    private let base: UnsafeMutableRawPointer
    let mappedLength: Int
    /// Current length of the file in bytes; always a multiple of the page size once formatted.
    private(set) var size: Int

    /// Maps `mappedLength` bytes of `descriptor`'s file and takes ownership of the descriptor:
    /// it is closed when this object goes away. When mapping fails, the caller still owns it.
    init(_ descriptor: FileDescriptor, readOnly: Bool, mappedLength: Int) throws(LarderError) {
        self.descriptor = descriptor
        self.isReadOnly = readOnly
        do throws(LarderError) {
            // Never believe in more file than is mapped: bytes past the mapping are not ours.
            size = min(try descriptor.size(), mappedLength)
            guard mappedLength > 0 else { throw LarderError(.invalidArgument, "empty mapping") }
            base = try SystemCall.map(descriptor.rawValue, length: mappedLength, writable: !readOnly)
            self.mappedLength = mappedLength
        } catch {
            throw error.at(descriptor.path)
        }
    }

    deinit {
        SystemCall.unmap(base, length: mappedLength)
        descriptor.close()
    }

    /// Whether `[offset, offset + length)` lies inside the file. Safe for any inputs.
    @inline(__always)
    func contains(_ offset: Int, _ length: Int) -> Bool {
        offset >= 0 && length >= 0 && offset <= size && length <= size &- offset
    }

    /// Adopts a length that another party (a rebuild that found the file shorter) established.
    func adoptSize(_ newSize: Int) {
        precondition(newSize >= 0 && newSize <= mappedLength)
        size = newSize
        checkInvariants()
    }

    private func checkInvariants() {
        #if DEBUG
        precondition(size >= 0 && size <= mappedLength, "the file's size is outside the mapping")
        #endif
    }

    /// Cuts the file on disk back to `end` (the ring's end) when it is longer. What lies past the
    /// ring's end is no part of the file, but a later `grow` keeps it (reserving blocks keeps
    /// their bytes): a power cut can leave records there that the meta copy in force never named,
    /// which the ring would take in again, newer-numbered than what recovery writes since
    /// (FORMAT.md 7.4).
    func discard(past end: Int) throws(LarderError) {
        precondition(!isReadOnly && end >= 0)
        guard try descriptor.size() > end else { return }
        do throws(LarderError) {
            try SystemCall.truncate(descriptor.rawValue, to: end)
        } catch {
            throw error.at(path)
        }
        size = min(size, end)
        checkInvariants()
    }

    /// Makes the file `newSize` bytes long with disk space reserved for all of it, so that later
    /// stores through the map cannot fault on a full disk. Never shrinks.
    func grow(to newSize: Int) throws(LarderError) {
        precondition(!isReadOnly)
        guard newSize > size else { return }
        guard newSize <= mappedLength else {
            throw LarderError(.full, "the file would exceed its capacity", path: path)
        }
        let rc = lrd_preallocate(descriptor.rawValue, UInt64(size), UInt64(newSize - size))
        if rc != 0 {
            // posix_fallocate may have extended the file partly; cut it back so that the
            // length we believe in is the length whose blocks are really reserved.
            try? SystemCall.truncate(descriptor.rawValue, to: size)
            throw SystemCall.error("reserve \(newSize - size) bytes", errno: rc).at(path)
        }
        size = newSize
        checkInvariants()
    }

    /// Reserves disk space for the holes in the file's first `size` bytes (a file copied sparse),
    /// which `grow` never reserved: stores through the map into them cannot fault on a full
    /// disk either.
    func reserveHoles() throws(LarderError) {
        precondition(!isReadOnly)
        let rc = lrd_reserve_holes(descriptor.rawValue, UInt64(size))
        if rc != 0 { throw SystemCall.error("reserve the file's holes", errno: rc).at(path) }
    }

    /// Writes dirty pages in `[offset, offset + length)` back and waits for the disk.
    func flush(_ offset: Int = 0, _ length: Int? = nil, durable: Bool = true) throws(LarderError) {
        guard !isReadOnly else { return }
        let pageMask = SystemCall.systemPageSize - 1
        let start = offset & ~pageMask
        let end = min(size, offset + (length ?? size))
        if end > start {
            do throws(LarderError) {
                try SystemCall.flush(base + start, length: end - start)
            } catch {
                throw error.at(path)
            }
        }
        if durable { try descriptor.synchronize() }
    }

    // MARK: - Views handed out

    /// The start of the map, for `ReadView` and `PublishedView`. Their readers check every
    /// offset against a limit no larger than `size` before they touch it.
    @inline(__always)
    var viewBase: UnsafeMutableRawPointer { base }

    /// A number no other map of this process has while this one lives: its address.
    var mappingTag: UInt64 { UInt64(UInt(bitPattern: base)) }

    /// The `length` bytes at `offset` that every process shares as words (`SharedState`). The
    /// range lies inside the mapping; callers touch it only once the file holds it.
    func sharedPage(at offset: Int, length: Int) -> UnsafeMutableRawPointer {
        precondition(offset >= 0 && length >= 0 && offset + length <= mappedLength, "the shared page is outside the mapping")
        return base + offset
    }

    /// The `count` 64-bit slots at `offset` (an index segment's table), 8-byte aligned and inside
    /// the file.
    func slots(at offset: Int, count: Int) -> UnsafeMutablePointer<UInt64> {
        precondition(offset & 7 == 0 && count >= 0 && contains(offset, count * 8), "slots outside the file")
        return (base + offset).assumingMemoryBound(to: UInt64.self)
    }

    /// Whether the system can map pages of this file ahead of their first store.
    var canPopulateAhead: Bool { !isReadOnly && lrd_populate_for_writing(base, 0) == 0 }

    /// Maps the pages of `range` ready for writing on a thread of its own, which calls
    /// `done(context)` at its end. False when no thread could be started (`done` is not called).
    func populateInBackground(_ range: Range<Int>, done: @convention(c) (UnsafeMutableRawPointer?) -> Void,
                              context: UnsafeMutableRawPointer) -> Bool {
        precondition(range.lowerBound >= 0 && range.upperBound <= mappedLength, "pages outside the mapping")
        return lrd_populate_in_background(base + range.lowerBound, range.count, done, context) == 0
    }

    // MARK: - Typed access (little-endian, unaligned-safe)

    @inline(__always)
    func load<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        precondition(contains(offset, MemoryLayout<T>.size), "read outside the file")
        return T(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    @inline(__always)
    func store<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        precondition(contains(offset, MemoryLayout<T>.size), "write outside the file")
        base.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self)
    }

    /// The bytes `[offset, offset + count)`; the caller has checked the range with `contains`.
    @inline(__always)
    func bytes(at offset: Int, count: Int) -> UnsafeRawBufferPointer {
        precondition(contains(offset, count), "range outside the file")
        return UnsafeRawBufferPointer(start: base + offset, count: count)
    }

    @inline(__always)
    func mutableBytes(at offset: Int, count: Int) -> UnsafeMutableRawBufferPointer {
        precondition(contains(offset, count), "range outside the file")
        return UnsafeMutableRawBufferPointer(start: base + offset, count: count)
    }

    /// Whether `bytes` (anyone's memory) share an address with this mapping: bytes a caller
    /// passes in may have been lent out of it.
    @inline(__always)
    func mapsAnyOf(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let start = bytes.baseAddress, bytes.count > 0 else { return false }
        return start < UnsafeRawPointer(base) + mappedLength && UnsafeRawPointer(base) < start + bytes.count
    }

    func zero(_ offset: Int, _ count: Int) {
        guard count > 0 else { return }
        precondition(contains(offset, count), "write outside the file")
        memset(base + offset, 0, count)
    }

    // MARK: - Atomic access for fields that readers change or read without the writer lock

    @inline(__always)
    func loadAcquire64(at offset: Int) -> UInt64 {
        precondition(contains(offset, 8) && offset & 7 == 0, "bad atomic read")
        return lrd_load_acquire_u64(base + offset)
    }

    @inline(__always)
    func storeRelease64(_ value: UInt64, at offset: Int) {
        precondition(contains(offset, 8) && offset & 7 == 0, "bad atomic write")
        lrd_store_release_u64(base + offset, value)
    }

    /// Compare-and-swap of an aligned 64-bit word; true when it held `expected`.
    @inline(__always)
    func compareExchange64(at offset: Int, expected: UInt64, desired: UInt64) -> Bool {
        precondition(contains(offset, 8) && offset & 7 == 0, "bad atomic access")
        return lrd_cas_u64(base + offset, expected, desired) != 0
    }

    @inline(__always)
    func fetchAnd64(_ mask: UInt64, at offset: Int) {
        precondition(contains(offset, 8) && offset & 7 == 0, "bad atomic access")
        _ = lrd_fetch_and_u64(base + offset, mask)
    }

    @inline(__always)
    func fetchOr64(_ bits: UInt64, at offset: Int) {
        precondition(contains(offset, 8) && offset & 7 == 0, "bad atomic access")
        _ = lrd_fetch_or_u64(base + offset, bits)
    }

}
