# expect: syntax error: empty program, expected `kernel NAME target TARGET`
