from cloudseed.cli import main

main()
