// A TaskExecutor over the connection's serial queue, so exported-method handler Tasks start
// where the call was decoded and can reply without a thread hop.
import Dispatch

/// Runs task jobs on a DispatchQueue. Handler Tasks prefer it; anything they await elsewhere
/// moves them off it, so a handler only holds the queue while it runs synchronous code.
final class QueueTaskExecutor: TaskExecutor {
  let queue: DispatchQueue
  init(queue: DispatchQueue) { self.queue = queue }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
  }
}
