package main

// group runs goroutines as one: each is added with its start (execute) and
// its stop (interrupt). Run starts them all; when the first returns, every
// interrupt is called, and Run returns once all have returned. The style is
// oklog/run's Group. The zero value is an empty group; Add must not be
// called after Run, and Run is called once.
type group struct {
	actors []actor
}

type actor struct {
	execute   func() error
	interrupt func(error)
}

// Add adds a goroutine to the group: execute runs it, and interrupt,
// called once with the error of the first to return, must make execute
// return.
func (g *group) Add(execute func() error, interrupt func(error)) {
	g.actors = append(g.actors, actor{execute, interrupt})
}

// Run runs every goroutine added and returns when all have returned, with
// the first non-nil error any of them returned (nil if none did). An empty
// group returns nil at once.
func (g *group) Run() error {
	if len(g.actors) == 0 {
		return nil
	}
	errs := make(chan error, len(g.actors))
	for _, a := range g.actors {
		go func() { errs <- a.execute() }()
	}
	first := <-errs
	for _, a := range g.actors {
		a.interrupt(first)
	}
	for range len(g.actors) - 1 {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}
