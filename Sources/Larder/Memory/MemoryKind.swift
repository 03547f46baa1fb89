/// What decoded an object of the memory tier: its type, and the coder's type for a `Codable`
/// value. A read returns only objects of its own kind (a read with another coder decodes anew).
@usableFromInline
struct MemoryKind: Hashable, Sendable {
    let value: ObjectIdentifier
    /// The coder's type, or `MemoryKind`'s own for none (no tag, so that a node stays small).
    let coder: ObjectIdentifier

    @usableFromInline
    init(_ type: Any.Type) {
        value = ObjectIdentifier(type)
        coder = ObjectIdentifier(MemoryKind.self)
    }

    @usableFromInline
    init(_ type: Any.Type, coder: any CacheCoder) {
        self.init(type, coderType: ObjectIdentifier(Swift.type(of: coder)))
    }

    /// The kind of `type` decoded by a coder of the type `coderType` names.
    @usableFromInline
    init(_ type: Any.Type, coderType: ObjectIdentifier) {
        value = ObjectIdentifier(type)
        coder = coderType
    }
}
