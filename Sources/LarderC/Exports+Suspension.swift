import CLarderABI
import Larder

// larder_suspend and larder_resume: giving the file's locks up while the app is suspended.

@c(larder_suspend)
public func larderSuspend(_ db: UnsafeMutablePointer<larder>?) -> Int32 {
    withCache(db) { cache in
        try cache.suspend()
        return Status.ok
    }
}

@c(larder_resume)
public func larderResume(_ db: UnsafeMutablePointer<larder>?) -> Int32 {
    withCache(db) { cache in
        try cache.resume()
        return Status.ok
    }
}
