module github.com/ontopix/sluice

go 1.26
