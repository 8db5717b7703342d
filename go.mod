module github.com/loomlm/loom

go 1.26

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)
