// "Did you mean ...?" for a mistyped option or command name.

/// The candidate closest to `word` by edit distance, if it is close enough to be a typo
/// (at most two edits, and fewer edits than half the word's length).
func closestMatch(to word: String, among candidates: [String]) -> String? {
  let limit = min(2, max(1, word.count / 2))
  var best: (name: String, distance: Int)?
  for candidate in candidates {
    let distance = editDistance(Array(word), Array(candidate))
    if distance <= limit, distance < best?.distance ?? .max {
      best = (candidate, distance)
    }
  }
  return best?.name
}

/// Levenshtein distance: insertions, deletions and substitutions each cost one.
func editDistance(_ a: [Character], _ b: [Character]) -> Int {
  if a.isEmpty { return b.count }
  var previous = Array(0...b.count)
  for (i, x) in a.enumerated() {
    var current = [i + 1]
    for (j, y) in b.enumerated() {
      current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
    }
    previous = current
  }
  return previous[b.count]
}
