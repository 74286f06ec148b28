package registry

// CountWith makes r call lookup for each look-up of a tool by name and read
// for each pass over a call's arguments, for tests outside the package
// that drive the doors.
func CountWith(r *Registry, lookup func(name string), read func()) {
	r.hooks = &hooks{lookup: lookup, read: read}
}
