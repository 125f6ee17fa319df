package inventory

// SetAfterRecord sets the hook Sales.Open calls between its PostgreSQL
// record and its Redis step (for the external tests).
func SetAfterRecord(s *Sales, f func()) { s.afterRecord = f }
