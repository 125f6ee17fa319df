package recovery

// BetweenReads makes r call f in every attempt after it read the holds
// and before it reads the streams.
func BetweenReads(r *Recoverer, f func()) { r.betweenReads = f }
