#if canImport(UIKit) || canImport(AppKit)
#if canImport(UIKit)
import UIKit
#else
import AppKit
#endif

/// Stores images as PNG or JPEG bytes and keeps them decoded in memory, at the cost of their
/// bitmaps: `UIImage` where UIKit is, `NSImage` on macOS (Apple platforms only).
///
/// ```swift
/// try cache.set(image, forKey: url.absoluteString, using: ImageConversion(format: .jpeg(quality: 0.8)))
/// let again = try cache.value(forKey: url.absoluteString, using: ImageConversion())
/// ```
public struct ImageConversion: CacheConversion {
    /// How an image is stored.
    public enum Format: Hashable, Sendable {
        /// Lossless.
        case png
        /// Lossy, at a quality from 0 (smallest) to 1 (best).
        case jpeg(quality: Double)
    }

    /// How images are stored (reading takes any format the platform's image type reads).
    public var format: Format

    /// A conversion storing images in `format` (PNG by default).
    public init(format: Format = .png) {
        self.format = format
    }
}

#if canImport(UIKit)
extension ImageConversion {
    /// The image's bytes in ``format``.
    public func bytes(from value: UIImage) throws -> Data {
        let data: Data?
        switch format {
        case .png: data = value.pngData()
        case .jpeg(let quality): data = value.jpegData(compressionQuality: CGFloat(quality))
        }
        guard let data else { throw LarderError(.invalidArgument, "the image has no \(format) form") }
        return data
    }

    /// The image in `bytes`.
    public func value(from bytes: Data) throws -> UIImage {
        guard let image = UIImage(data: bytes) else { throw LarderError(.invalidArgument, "the bytes are not an image") }
        return image
    }

    /// The bytes of the image's bitmap: rows times bytes per row, or 4 bytes a pixel.
    public func memoryCost(of value: UIImage) -> Int {
        if let image = value.cgImage { return max(image.bytesPerRow * image.height, 1) }
        let pixels = value.size.width * value.scale * value.size.height * value.scale
        return max(Int(pixels * 4), 1)
    }
}
#else
extension ImageConversion {
    /// The image's bytes in ``format``.
    public func bytes(from value: NSImage) throws -> Data {
        guard let tiff = value.tiffRepresentation, let bitmap = NSBitmapImageRep(data: tiff) else {
            throw LarderError(.invalidArgument, "the image has no bitmap")
        }
        let data: Data?
        switch format {
        case .png: data = bitmap.representation(using: .png, properties: [:])
        case .jpeg(let quality): data = bitmap.representation(using: .jpeg, properties: [.compressionFactor: NSNumber(value: quality)])
        }
        guard let data else { throw LarderError(.invalidArgument, "the image has no \(format) form") }
        return data
    }

    /// The image in `bytes`.
    public func value(from bytes: Data) throws -> NSImage {
        guard let image = NSImage(data: bytes) else { throw LarderError(.invalidArgument, "the bytes are not an image") }
        return image
    }

    /// The bytes of the image's largest bitmap at 4 bytes a pixel, or of its size in points.
    public func memoryCost(of value: NSImage) -> Int {
        let pixels = value.representations.map { $0.pixelsWide * $0.pixelsHigh }.max() ?? 0
        if pixels > 0 { return pixels * 4 }
        return max(Int(value.size.width * value.size.height * 4), 1)
    }
}
#endif
#endif
