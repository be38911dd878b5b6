// admit/detail/thread_annotations.hpp — the attributes of clang's thread-safety analysis (-Wthread-safety), as
// Abseil's ABSL_GUARDED_BY and friends: what a mutex guards, and which functions must or must not hold it, stated so
// that the compiler checks it. They expand to nothing on other compilers.
//
//   class room {
//     admit::detail::mutex mutex_;
//     std::size_t waiting_ ADMIT_GUARDED_BY(mutex_) = 0;    // read or written only with mutex_ held
//     void grant() ADMIT_REQUIRES(mutex_);                  // called only with mutex_ held
//   };
#pragma once

#if defined(__clang__)
#define ADMIT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ADMIT_THREAD_ANNOTATION(x)
#endif

// A type that is a lock (a mutex): what the other attributes name.
#define ADMIT_CAPABILITY(name) ADMIT_THREAD_ANNOTATION(capability(name))
// An RAII type whose constructor takes a lock and whose destructor gives it back.
#define ADMIT_SCOPED_CAPABILITY ADMIT_THREAD_ANNOTATION(scoped_lockable)
// A data member read or written only while the lock is held.
#define ADMIT_GUARDED_BY(lock) ADMIT_THREAD_ANNOTATION(guarded_by(lock))
// A pointer member whose pointee is read or written only while the lock is held.
#define ADMIT_PT_GUARDED_BY(lock) ADMIT_THREAD_ANNOTATION(pt_guarded_by(lock))
// A function called only with the lock(s) held, which it does not give back.
#define ADMIT_REQUIRES(...) ADMIT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// A function called only without the lock(s) held (it takes them itself).
#define ADMIT_EXCLUDES(...) ADMIT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// A function that takes the lock(s) and returns with them held.
#define ADMIT_ACQUIRE(...) ADMIT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
// A function that takes the lock(s) when it returns true.
#define ADMIT_TRY_ACQUIRE(...) ADMIT_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// A function that gives the lock(s) back.
#define ADMIT_RELEASE(...) ADMIT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// A function whose locking the analysis cannot follow (say why where it is used).
#define ADMIT_NO_THREAD_SAFETY_ANALYSIS ADMIT_THREAD_ANNOTATION(no_thread_safety_analysis)
