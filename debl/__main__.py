from debl.cli import main

main()
