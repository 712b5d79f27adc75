package memory

// forget drops session id from the index (herald sessions delete writes a
// tombstone entry for it): its messages no longer match any query and their
// stored text is gone. An id used again later starts a new document.
// Called with ix.mu held.
func (ix *Index) forget(id string) {
	ord, ok := ix.ByID[id]
	if !ok {
		return
	}
	for term, posts := range ix.Postings {
		kept := posts[:0]
		for _, p := range posts {
			if ix.Docs[p.Doc].Session != ord {
				kept = append(kept, p)
			}
		}
		if len(kept) == 0 {
			delete(ix.Postings, term)
		} else {
			ix.Postings[term] = kept
		}
	}
	for i := range ix.Docs {
		if ix.Docs[i].Session == ord {
			ix.TermSum -= int64(ix.Docs[i].Terms)
			ix.Docs[i].Terms = 0
		}
	}
	doc := ix.Sessions[ord]
	doc.Msgs, doc.Hidden = nil, true
	delete(ix.ByID, id)
}
