import Foundation
import Larder

// A media cache: images and voice notes by URL, downloaded once and served from disk afterwards,
// within a byte limit. The least recently used make way; the ones the user keeps looking at stay.
//
//     swift run media-cache [cache-file]

/// The network, in-process: "downloads" made-up images and audio (deterministic bytes, so any
/// value read back can be checked) and counts them.
actor MediaServer {
    private(set) var downloads = 0

    func download(_ url: String, bytes: Int) async -> Data {
        downloads += 1
        var state = url.utf8.reduce(0xCBF2_9CE4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 } | 1
        return Data((0..<bytes).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        })
    }
}

/// A decoded image: what the app draws. Decoding the file's bytes takes a pass over them (as a
/// JPEG decoder would, only faster), and the bitmap costs 4 bytes a pixel of memory.
final class Picture: Sendable {
    let encoded: Data
    let pixelSum: UInt64
    /// How many pictures were decoded, in the whole run.
    nonisolated(unsafe) static var decoded = 0

    init(decoding bytes: Data) {
        encoded = bytes
        pixelSum = bytes.reduce(0) { $0 &+ UInt64($1) }
        Picture.decoded += 1
    }
}

/// The pictures' bytes go to the file; the decoded pictures stay in memory.
struct PictureConversion: CacheConversion {
    func bytes(from value: Picture) throws -> Data { value.encoded }
    func value(from bytes: Data) throws -> Picture { Picture(decoding: bytes) }
    func memoryCost(of value: Picture) -> Int { value.encoded.count * 4 }
}

/// The app: a photo browser and a messenger's voice notes.
enum MediaCacheExample {
    static let server = MediaServer()
    static let photoBytes = 100_000

    static func photoURL(_ number: Int) -> String { "https://images.example/photos/\(number).jpg" }

    /// The app's one call: the picture for `url`, from memory while the file still holds it,
    /// decoded from disk when it is there, downloaded once when not.
    static func image(_ url: String, in pictures: TypedCache<String, Picture>) async throws -> Picture {
        try await pictures.value(forKey: url) { Picture(decoding: await server.download(url, bytes: photoBytes)) }
    }

    /// Photo numbers of `keys`, in order.
    static func names(_ keys: [Data]) -> String {
        keys.map { String(decoding: $0, as: UTF8.self).replacingOccurrences(of: "https://images.example/photos/", with: "") }
            .sorted { $0.localizedStandardCompare($1) == .orderedAscending }
            .joined(separator: " ")
    }

    static func run(path: String) async throws {
        // A 2 MiB file: room for about twenty 100 KB photos; memory for eight decoded ones.
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(2),
                                                         memory: MemoryLimits(cost: .bytes(8 * 4 * photoBytes), count: 8)))
        try cache.removeAll()
        let pictures = TypedCache<String, Picture>(cache, conversion: PictureConversion())
        print("media-cache on \(path): capacity \(ByteCount(bytes: cache.capacity)), photos of \(photoBytes / 1000) KB")

        // The user scrolls through 60 photos, and keeps going back to photos 1, 2 and 3.
        let favorites = [1, 2, 3]
        for number in 1...60 {
            _ = try await image(photoURL(number), in: pictures)
            if number % 4 == 0 {
                for favorite in favorites { _ = try await image(photoURL(favorite), in: pictures) }
            }
        }
        var stats = cache.stats
        print("scrolled through 60 photos: \(await server.downloads) downloads, \(stats.entryCount) photos kept, \(stats.evictions) evicted")
        print("file \(ByteCount(bytes: stats.fileBytes)), never more than the capacity: \(stats.fileBytes <= stats.capacity)")
        let favoritesKept = favorites.allSatisfy { cache.contains(photoURL($0)) }
        print("favorites still on disk: \(favoritesKept ? "yes" : "no"); photo 10 still on disk: \(cache.contains(photoURL(10)) ? "yes" : "no")")

        print("pictures in memory: \(stats.memoryCount) (\(stats.memoryCost / 1000) KB), \(stats.memoryHits) drawn from memory, \(Picture.decoded) decoded")

        // Opening the favorites again costs no download, and no decoding while they stay in memory.
        let before = await server.downloads
        let decodedBefore = Picture.decoded
        for favorite in favorites { _ = try await image(photoURL(favorite), in: pictures) }
        print("favorites opened again: \(await server.downloads - before) downloads")
        print("favorites decoded again: \(Picture.decoded - decodedBefore)")

        // A tighter limit of the app's own (low disk space, say): keep 500 KB of photos, least
        // recently used out first.
        let evicted = try await cache.trim(toBytes: 500_000)
        stats = cache.stats
        print("trimmed to 500 KB: \(evicted) evicted, \(stats.entryCount) left (\(stats.liveBytes / 1000) KB): \(names(try cache.keys))")

        // Voice notes under their own prefix, all removed when the conversation is deleted.
        let conversation = "https://voice.example/conversation-7/"
        for note in 1...3 {
            let url = conversation + "note-\(note).m4a"
            try await cache.set(await server.download(url, bytes: 20_000), forKey: url)
        }
        print("voice notes stored: \(try await cache.keys(withPrefix: conversation).count)")
        let removed = try await cache.removeAll(withPrefix: conversation)
        print("conversation deleted: \(removed) voice notes removed, \(try await cache.keys(withPrefix: "https://voice.example/").count) left")
        try cache.close()
    }
}

let path = CommandLine.arguments.dropFirst().first ?? FileManager.default.temporaryDirectory
    .appendingPathComponent("larder-media-cache.larder").path
do {
    try await MediaCacheExample.run(path: path)
} catch {
    print("media-cache failed: \(error)")
    exit(1)
}
