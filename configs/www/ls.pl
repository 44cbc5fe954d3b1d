/index.html
/hello.txt
