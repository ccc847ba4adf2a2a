from etspec.cli import main

main()
