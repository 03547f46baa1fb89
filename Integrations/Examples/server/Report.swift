import Foundation

/// The expensive response: a report that takes `work` to make (a stand-in for a slow query or a
/// call to another service), some 2 KB of JSON.
enum Report {
    static func make(id: String, work: Duration) async throws -> String {
        try await Task.sleep(for: work)
        // The same figures in every process (a `hashValue` is seeded per process).
        let seed = id.utf8.reduce(17) { $0 &* 31 &+ Int($1) }
        let rows = (0..<24).map { hour in
            #"{"hour":\#(hour),"visits":\#((seed &+ hour &* 977) & 0xFFFF),"label":"report \#(id) hour \#(hour)"}"#
        }
        return #"{"report":"\#(id)","rows":[\#(rows.joined(separator: ","))]}"#
    }
}
