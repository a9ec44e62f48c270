module github.com/kvgate/kvgate

go 1.26.8
